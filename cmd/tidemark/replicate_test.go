package main

import (
	"bytes"
	"context"
	"maps"
	"strings"
	"syscall"
	"testing"
)

// replicate --once copies the job's checkpoints into a new store and ls
// there says so; a second pass sends nothing; the demo fails over to the
// replica (it resumes from the copied checkpoint, exactly once); a
// replicate onto the replica after that refuses, changing nothing.
func TestReplicateOnceThenFailOverWithTheDemo(t *testing.T) {
	dirA := t.TempDir()
	storeA := fileURL(t.TempDir())
	if _, _, code := tm(t, "", demoArgs(dirA, storeA, "--crash-after-records", "9000")...); code != exitCrashed {
		t.Fatalf("crashing demo on A: exit %d, want %d", code, exitCrashed)
	}
	storeB := fileURL(t.TempDir())
	out := must(t, "", "replicate", "--from", storeA, "--to", storeB, "--once")
	if !strings.Contains(out, "replicated ckpt-") || !strings.Contains(out, "recovery point 0s") {
		t.Fatalf("replicate --once: %q", out)
	}
	var lsA, lsB struct {
		Checkpoints []struct {
			ID       string   `json:"id"`
			Job      string   `json:"job"`
			Pointers []string `json:"pointers"`
		} `json:"checkpoints"`
		Replication *struct {
			Checkpoint    string  `json:"checkpoint"`
			RecoveryPoint float64 `json:"recovery_point_seconds"`
			Source        string  `json:"source"`
		} `json:"replication"`
	}
	mustJSON(t, storeA, &lsA, "ls")
	mustJSON(t, storeB, &lsB, "ls")
	latestA := lsA.Checkpoints[len(lsA.Checkpoints)-1]
	if r := lsB.Replication; r == nil || r.Checkpoint != latestA.ID || r.RecoveryPoint != 0 || r.Source != storeA {
		t.Fatalf("ls of the replica: replication %+v, want %s from %s at recovery point 0", r, latestA.ID, storeA)
	}
	if got := lsB.Checkpoints[len(lsB.Checkpoints)-1]; got.ID != latestA.ID || got.Job != latestA.Job || got.Job == "" {
		t.Fatalf("the replica's latest checkpoint %+v, want A's %+v", got, latestA)
	}
	if text := must(t, storeB, "ls"); !strings.Contains(text, "replica of "+storeA) || !strings.Contains(text, "recovery point 0s") {
		t.Fatalf("ls of the replica does not say it is one:\n%s", text)
	}
	if again := must(t, "", "replicate", "--from", storeA, "--to", storeB, "--once"); strings.Contains(again, "replicated ckpt-") {
		t.Fatalf("a second pass copied again: %q", again)
	}

	// A is lost: the demo resumes on B from the last checkpoint copied.
	res := must(t, "", demoArgs(t.TempDir(), storeB)...)
	if !strings.Contains(res, "exactly-once: OK, 20000 records") {
		t.Fatalf("the demo on the replica: %q", res)
	}
	bsB := openURL(t, storeB)
	before := storeBytes(t, bsB)
	_, errOut, code := tm(t, "", "replicate", "--from", storeA, "--to", storeB, "--once")
	if code != exitError || !strings.Contains(errOut, "no replica any more") {
		t.Fatalf("replicate onto the failed-over store: exit %d, %q", code, errOut)
	}
	if after := storeBytes(t, bsB); !maps.Equal(before, after) {
		t.Fatal("the refused replicate changed the store")
	}
}

func TestReplicateUsage(t *testing.T) {
	store := fileURL(t.TempDir())
	for _, args := range [][]string{
		{"replicate", "--to", store},
		{"replicate", "--from", store, "--to", store},
		{"replicate", "--from", store, "--to", fileURL(t.TempDir()), "--interval", "0s"},
		{"replicate", "--from", store, "--to", fileURL(t.TempDir()), "--keep", "0"},
	} {
		if _, errOut, code := tm(t, "", args...); code != exitUsage {
			t.Errorf("tidemark %s: exit %d, want %d (%s)", strings.Join(args, " "), code, exitUsage, errOut)
		}
	}
}

// A running replicate serves every replication family docs/metrics.md
// documents at --metrics-addr, with what it copied, and a SIGTERM stops
// it with exit 0.
func TestReplicateServesTheDocumentedMetrics(t *testing.T) {
	storeA, storeB := ranDemo(t), fileURL(t.TempDir())
	addr := freeAddr(t)
	ctx, stop := context.WithCancelCause(t.Context())
	done := make(chan int, 1)
	var out, errb bytes.Buffer
	go func() {
		done <- run(ctx, []string{"replicate", "--from", storeA, "--to", storeB, "--interval", "50ms", "--metrics-addr", addr},
			env{stdout: &out, stderr: &errb, getenv: func(string) string { return "" }})
	}()
	body := scrapeUntil(t, addr, "the replica caught up", done, func(b string) bool {
		return metricValue(b, "tidemark_replication_checkpoint_duration_seconds_count") >= 1 &&
			metricValue(b, "tidemark_replication_recovery_point_seconds") == 0
	})
	for _, name := range documentedFamilies(t) {
		if strings.HasPrefix(name, "tidemark_replication_") && !strings.Contains(body, "\n"+name) && !strings.Contains(body, "# TYPE "+name+" ") {
			t.Errorf("family %s (in docs/metrics.md) is not served", name)
		}
	}
	wantPositive(t, body, "after a checkpoint copied",
		"tidemark_replication_copied_bytes_total",
		"tidemark_replication_copied_objects_total",
		"tidemark_replication_last_source_completed_timestamp_seconds",
		"tidemark_build_info",
	)
	stop(signalError{syscall.SIGTERM})
	if code := <-done; code != exitOK {
		t.Fatalf("replicate stopped by SIGTERM: exit %d\n%s", code, errb.String())
	}
	if !strings.Contains(out.String(), "replicated ckpt-") {
		t.Errorf("stdout %q does not say what was copied", out.String())
	}
}
