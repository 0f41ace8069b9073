package main

import (
	"strings"
	"testing"
)

// TestDemoRemoteStateCrashesAndResumesOnAnEmptyNode: --remote-state
// alone (all levels) and --remote-state=lower both run the job with its
// tables in the store, crash, and resume on an empty --dir exactly once.
func TestDemoRemoteStateCrashesAndResumesOnAnEmptyNode(t *testing.T) {
	for _, flag := range []string{"--remote-state", "--remote-state=lower"} {
		t.Run(strings.TrimPrefix(flag, "--"), func(t *testing.T) {
			store := fileURL(t.TempDir())
			args := demoArgs(t.TempDir(), store, flag, "--crash-after-records", "10000")
			if _, errOut, code := tm(t, "", args...); code != exitCrashed || !strings.Contains(errOut, "state in the store") {
				t.Fatalf("crashing demo: exit %d, want %d and the state mode named\n%s", code, exitCrashed, errOut)
			}
			args = demoArgs(t.TempDir(), store, flag, "--crash-after-records", "10000")
			out, errOut, code := tm(t, "", args...)
			if code != 0 || !strings.Contains(out, "exactly-once: OK") || !strings.Contains(errOut, "resumed from checkpoint") {
				t.Fatalf("resumed demo: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
			}
			if ls := blobKeys(t, store, "remote/"); len(ls) == 0 {
				t.Fatalf("no object under remote/ in %s: the state was not in remote mode", store)
			}
		})
	}
}

// TestDemoRemoteStateResumedWithoutTheFlagIsRefused: the job's state is
// in the store, so a resume without --remote-state exits non-zero saying
// so, before it takes the writer role; with the flag it then completes.
func TestDemoRemoteStateResumedWithoutTheFlagIsRefused(t *testing.T) {
	store := fileURL(t.TempDir())
	if _, errOut, code := tm(t, "", demoArgs(t.TempDir(), store, "--remote-state", "--crash-after-records", "10000")...); code != exitCrashed {
		t.Fatalf("crashing demo: exit %d\n%s", code, errOut)
	}
	writer := blobGet(t, store, "_writer")
	_, errOut, code := tm(t, "", demoArgs(t.TempDir(), store)...)
	if code == 0 || !strings.Contains(errOut, "remote mode") || !strings.Contains(errOut, "--remote-state") {
		t.Fatalf("local resume of remote state: exit %d, want a refusal naming --remote-state:\n%s", code, errOut)
	}
	if got := blobGet(t, store, "_writer"); got != writer {
		t.Fatalf("the refused run took the writer role: _writer %q, was %q", got, writer)
	}
	out, errOut, code := tm(t, "", demoArgs(t.TempDir(), store, "--remote-state")...)
	if code != 0 || !strings.Contains(out, "exactly-once: OK") {
		t.Fatalf("resume with --remote-state: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
}

func TestDemoRemoteStateRejectsAnUnknownValue(t *testing.T) {
	_, errOut, code := tm(t, "", demoArgs(t.TempDir(), fileURL(t.TempDir()), "--remote-state=everything")...)
	if code != exitUsage || !strings.Contains(errOut, "want all or lower") {
		t.Fatalf("--remote-state=everything: exit %d, want %d (usage)\n%s", code, exitUsage, errOut)
	}
}

func blobKeys(t *testing.T, store, prefix string) []string {
	t.Helper()
	var keys []string
	for info, err := range openURL(t, store).List(t.Context(), prefix) {
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, info.Key)
	}
	return keys
}

func blobGet(t *testing.T, store, key string) string {
	t.Helper()
	rc, err := openURL(t, store).Get(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var sb strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := rc.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return sb.String()
}

// TestDemoRemoteStateWithWorkersRescales: --remote-state --workers 2
// keeps the workers' tables in the store; the job crashes and resumes
// with three workers on empty directories, exactly once.
func TestDemoRemoteStateWithWorkersRescales(t *testing.T) {
	store := fileURL(t.TempDir())
	args := demoArgs(t.TempDir(), store, append([]string{"--remote-state", "--workers", "2", "--crash-after-records", "10000"}, workerArgs...)...)
	if _, errOut, code := tm(t, "", args...); code != exitCrashed {
		t.Fatalf("crashing demo with 2 workers: exit %d, want %d\n%s", code, exitCrashed, errOut)
	}
	if ls := blobKeys(t, store, "remote/"); len(ls) == 0 {
		t.Fatalf("no object under remote/ in %s: the workers' state was not in remote mode", store)
	}
	args = demoArgs(t.TempDir(), store, append([]string{"--remote-state", "--workers", "3"}, workerArgs...)...)
	out, errOut, code := tm(t, "", args...)
	if code != 0 || !strings.Contains(out, "exactly-once: OK") {
		t.Fatalf("resumed demo with 3 workers: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
}

// TestDemoRemoteStateResumedWithWorkersIsRefused: a job whose state is in
// the store cannot be resumed by workers (they open state from local
// disk): refused before the writer role is taken.
func TestDemoRemoteStateResumedWithWorkersIsRefused(t *testing.T) {
	store := fileURL(t.TempDir())
	if _, errOut, code := tm(t, "", demoArgs(t.TempDir(), store, "--remote-state", "--crash-after-records", "10000")...); code != exitCrashed {
		t.Fatalf("crashing demo: exit %d\n%s", code, errOut)
	}
	writer := blobGet(t, store, "_writer")
	_, errOut, code := tm(t, "", demoArgs(t.TempDir(), store, append([]string{"--workers", "2"}, workerArgs...)...)...)
	if code == 0 || !strings.Contains(errOut, "remote mode") {
		t.Fatalf("resume by workers of remote state: exit %d, want a refusal:\n%s", code, errOut)
	}
	t.Logf("refused: %s", strings.TrimSpace(errOut))
	if got := blobGet(t, store, "_writer"); got != writer {
		t.Fatalf("the refused run took the writer role: _writer %q, was %q", got, writer)
	}
}
