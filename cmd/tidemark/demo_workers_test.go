package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// childMainEnv makes this test binary run as the tidemark command: the
// worker processes `tidemark demo --workers N` starts from its own
// executable (os.Executable) are this binary in the tests.
const childMainEnv = "TIDEMARK_TEST_RUN_AS_TIDEMARK"

// The variable is set for every process this test binary starts, so
// that no test (the documented commands included) can start a copy of the
// test binary that runs the tests instead of a worker.
func init() {
	if os.Getenv(childMainEnv) != "1" {
		_ = os.Setenv(childMainEnv, "1")
		return
	}
	sigs := newSignals()
	code := run(sigs.ctx, os.Args[1:], env{stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv, terminate: sigs.drainOn})
	sigs.stop()
	os.Exit(code)
}

// latestAssignment returns the id of the latest completed checkpoint of
// store and the assignment (owner → worker id) its record holds.
func latestAssignment(t *testing.T, store string) (string, map[string]string) {
	t.Helper()
	bs := openURL(t, store)
	read := func(key string, v any) {
		rc, err := bs.Get(t.Context(), key)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v", key, err)
		}
	}
	var ptr struct {
		ID string `json:"id"`
	}
	read("_latest-completed", &ptr)
	var rec struct {
		Workers   map[string]string `json:"workers"`
		StateDirs map[string]string `json:"state_dirs"`
	}
	read("checkpoints/"+ptr.ID+"/checkpoint.json", &rec)
	if !slices.Equal(slices.Sorted(maps.Keys(rec.Workers)), slices.Sorted(maps.Keys(rec.StateDirs))) {
		t.Fatalf("checkpoint %s assigns owners %v, has state of %v", ptr.ID, rec.Workers, rec.StateDirs)
	}
	return ptr.ID, rec.Workers
}

func distinctWorkers(a map[string]string) []string {
	return slices.Compact(slices.Sorted(maps.Values(a)))
}

// workersArgs are demoArgs for a job of n workers, slow enough to crash
// or kill mid-run.
func workersArgs(dir, store string, n int, extra ...string) []string {
	args := append([]string{"--workers", strconv.Itoa(n), "--slow", "50ms"}, workerArgs...)
	return demoArgs(dir, store, append(args, extra...)...)
}

// The job runs as a coordinator and two worker processes, crashes, and
// resumes on another node with three: the partitions and their owners
// are reassigned, each new worker restores its owners from the store,
// the next checkpoints record the new assignment, and the result is
// exactly once.
func TestDemoWithWorkersResumesWithAnotherNumberOfWorkers(t *testing.T) {
	store := fileURL(t.TempDir())
	_, errOut, code := tm(t, "", workersArgs(t.TempDir(), store, 2, "--crash-after-records", "10000")...)
	if code != exitCrashed {
		t.Fatalf("demo --workers 2: exit %d, want %d\n%s", code, exitCrashed, errOut)
	}
	first, before := latestAssignment(t, store)
	if w := distinctWorkers(before); len(w) != 2 {
		t.Fatalf("checkpoint %s of the run with 2 workers assigns its owners to %v", first, w)
	}

	var res map[string]any
	out, errOut, code := tm(t, "", workersArgs(t.TempDir(), store, 3, "--output", "json")...)
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil {
		t.Fatalf("demo --workers 3: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	if res["exactly_once"] != true || res["records"] != float64(20000) || res["restored"] == "" || res["start_offset"] == float64(0) {
		t.Fatalf("demo --workers 3: %v: want exactly once over 20000 records, resumed mid-way", res)
	}
	for k := range 3 {
		if w := fmt.Sprintf("tidemark demo worker (slot %d): owners ", k); !strings.Contains(lineWith(errOut, w), "restored from the store") {
			t.Errorf("worker %d did not say it restored its owners from the store:\n%s", k, errOut)
		}
	}
	last, after := latestAssignment(t, store)
	w := distinctWorkers(after)
	if last <= first || len(w) != 3 {
		t.Fatalf("checkpoint %s (after %s) assigns its owners to %v: want 3 workers", last, first, w)
	}
	for _, id := range w {
		if slices.Contains(distinctWorkers(before), id) {
			t.Errorf("worker %s of the first run is in the assignment of the second", id)
		}
	}
}

// A worker process that dies mid-run is replaced by a new one with an
// empty directory: it restores its owners from the store, every worker
// restarts from the last checkpoint, and the job ends exactly once.
func TestDemoWithWorkersReplacesAKilledWorker(t *testing.T) {
	store := fileURL(t.TempDir())
	var res map[string]any
	out, errOut, code := tm(t, "", workersArgs(t.TempDir(), store, 2, "--kill-worker-after-records", "3000", "--output", "json")...)
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil {
		t.Fatalf("demo: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	if res["exactly_once"] != true || res["replaced"] != float64(1) {
		t.Fatalf("demo: %v: want exactly once with one worker replaced\n%s", res, errOut)
	}
	for _, want := range []string{"killing itself now (--kill-worker-after-records)", "worker 0 (pid ", ") lost: exit status 137; starting a new worker for slot 0 on an empty directory", "restored from the store"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr does not say %q:\n%s", want, errOut)
		}
	}
	_, a := latestAssignment(t, store)
	if w := distinctWorkers(a); len(w) != 2 {
		t.Fatalf("the last checkpoint assigns its owners to %v, want 2 workers", w)
	}
}

// Flags of a job with workers that make no sense together are usage
// errors, refused before anything is written.
func TestDemoWithWorkersRefusesBadFlags(t *testing.T) {
	for _, extra := range [][]string{
		{"--workers", "-1"},
		{"--workers", "9"}, // more than the job's 8 owners
		{"--workers", "9", "--worker-listen", "127.0.0.1:0"},
		{"--worker-listen", "127.0.0.1:0"},
		{"--kill-worker-after-records", "5"},
		{"--workers", "2", "--worker-listen", "127.0.0.1:0", "--kill-worker-after-records", "5"},
		{"--workers", "2", "--worker-timeout", "0"},
		{"--workers", "2", "--checkpoint-every", "100"}, // only the workers see records
		{"--workers", "2", "--nats", "http://127.0.0.1:4222"},
		{"--nats", "nats://127.0.0.1:4222"},
	} {
		dir := t.TempDir()
		_, errOut, code := tmEnv(t, natsCreds, append([]string{"demo", "--dir", dir}, extra...)...)
		if code != exitUsage {
			t.Errorf("demo %v: exit %d, want %d\n%s", extra, code, exitUsage, errOut)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("demo %v wrote into --dir: %v", extra, entries)
		}
	}
	if _, errOut, code := tm(t, "", "demo", "worker", "--slot", "0"); code != exitUsage {
		t.Errorf("demo worker without --coordinator: exit %d, want %d\n%s", code, exitUsage, errOut)
	}
}

func TestDemoWorkerHelpListsOnlyFlagsAWorkerUses(t *testing.T) {
	out, _, code := tm(t, "", "demo", "worker", "--help")
	if code != 0 {
		t.Fatalf("demo worker --help: exit %d", code)
	}
	// The coordinator names the store; a worker prints no report. (The
	// example of a coordinator above the flags may name --store.)
	_, flags, _ := strings.Cut(out, "\nFlags:")
	for _, ignored := range []string{"--store", "--output", "--progress"} {
		if strings.Contains(flags, ignored) {
			t.Errorf("demo worker --help lists %s, which a worker ignores:\n%s", ignored, out)
		}
	}
	for _, used := range []string{"--coordinator", "--slot", "--dir", "--log-level", "--timeout"} {
		if !strings.Contains(flags, used) {
			t.Errorf("demo worker --help does not list %s:\n%s", used, out)
		}
	}
	// Hidden only in the worker's help: the demo's still lists them.
	if out, _, _ := tm(t, "", "demo", "--help"); !strings.Contains(out, "--store") || !strings.Contains(out, "--output") {
		t.Errorf("demo --help after demo worker --help lost the global flags:\n%s", out)
	}
}
