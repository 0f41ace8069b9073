package main

import (
	"strings"
	"testing"
)

// A job in remote state (here lower levels) resumed in local mode, in
// one process or with --workers, is told the mode it was written with;
// resumed with --workers in its mode, that it runs in one process.
func TestDemoRemoteStateRefusalsNameWhatToDo(t *testing.T) {
	store := fileURL(t.TempDir())
	if _, errOut, code := tm(t, "", demoArgs(t.TempDir(), store, "--remote-state=lower", "--crash-after-records", "10000")...); code != exitCrashed {
		t.Fatalf("crashing demo: exit %d\n%s", code, errOut)
	}
	for _, c := range []struct {
		extra     []string
		want, bad string
	}{
		{append([]string{"--workers", "2"}, workerArgs...), "cannot be opened in local mode; run again with --remote-state=lower", "resume without --workers"},
		{append([]string{"--workers", "2", "--remote-state=lower"}, workerArgs...), "this job runs in one process", "local mode"},
		{nil, "cannot be opened in local mode; run again with --remote-state=lower", "--workers"},
	} {
		_, errOut, code := tm(t, "", demoArgs(t.TempDir(), store, c.extra...)...)
		if code != exitError || !strings.Contains(errOut, c.want) || strings.Contains(errOut, c.bad) {
			t.Fatalf("resume %v of a --remote-state=lower job: exit %d, want %d saying %q:\n%s", c.extra, code, exitError, c.want, errOut)
		}
	}
}

// --remote-state= (an empty value) is a usage error, not local state.
func TestDemoEmptyRemoteStateIsAUsageError(t *testing.T) {
	storeDir := t.TempDir()
	_, errOut, code := tm(t, "", demoArgs(t.TempDir(), fileURL(storeDir), "--remote-state=")...)
	if code != exitUsage || !strings.Contains(errOut, "--remote-state= has an empty value: want all or lower") {
		t.Fatalf("--remote-state=: exit %d, want %d:\n%s", code, exitUsage, errOut)
	}
	if files := storeFiles(t, storeDir); len(files) != 0 {
		t.Fatalf("the refused run wrote %v", files)
	}
}

// A flag that needs --workers, given without it, is named alone: not
// the other (hidden) one.
func TestDemoWorkerFlagsWithoutWorkersNameTheFlagGiven(t *testing.T) {
	for _, c := range []struct {
		extra     []string
		want, bad string
	}{
		{[]string{"--worker-listen", "127.0.0.1:0"}, "demo: --worker-listen needs --workers", "kill-worker"},
		{[]string{"--kill-worker-after-records", "5"}, "demo: --kill-worker-after-records needs --workers", "worker-listen"},
	} {
		_, errOut, code := tm(t, "", demoArgs(t.TempDir(), fileURL(t.TempDir()), c.extra...)...)
		if code != exitUsage || !strings.Contains(errOut, c.want) || strings.Contains(errOut, c.bad) {
			t.Fatalf("demo %v: exit %d, want %d saying %q only:\n%s", c.extra, code, exitUsage, c.want, errOut)
		}
	}
}

// lineWith returns the first line of s that contains sub ("" if none).
func lineWith(s, sub string) string {
	for l := range strings.Lines(s) {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

// A --worker-listen coordinator refused for the job's shape refuses
// before it says it waits for workers.
func TestDemoListeningCoordinatorRefusesBeforeItWaits(t *testing.T) {
	store := fileURL(t.TempDir())
	if _, errOut, code := tm(t, "", demoArgs(t.TempDir(), store, "--crash-after-records", "10000")...); code != exitCrashed {
		t.Fatalf("crashing demo: exit %d\n%s", code, errOut)
	}
	_, errOut, code := tmEnv(t, natsCreds, demoArgs(t.TempDir(), store, append([]string{"--workers", "2", "--worker-listen", freeAddr(t)}, workerArgs...)...)...)
	if code != exitError || !strings.Contains(errOut, "this job runs in one process") || strings.Contains(errOut, "waiting") || strings.Contains(errOut, "warning") {
		t.Fatalf("--worker-listen on a one-process job: exit %d, want %d and the refusal alone:\n%s", code, exitError, errOut)
	}
}
