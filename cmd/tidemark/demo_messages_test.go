package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// A job in remote state (here lower levels) resumed with --workers is
// told that it cannot run with workers and how to resume it; resumed in
// local mode it is told the mode it was written with.
func TestDemoRemoteStateRefusalsNameWhatToDo(t *testing.T) {
	store := fileURL(t.TempDir())
	if _, errOut, code := tm(t, "", demoArgs(t.TempDir(), store, "--remote-state=lower", "--crash-after-records", "10000")...); code != exitCrashed {
		t.Fatalf("crashing demo: exit %d\n%s", code, errOut)
	}
	for _, c := range []struct {
		extra     []string
		want, bad string
	}{
		{[]string{"--workers", "2"}, "a job in remote state cannot run with workers; resume it without --workers, with --remote-state=lower", "cannot be opened in local mode"},
		{nil, "cannot be opened in local mode; run again with --remote-state=lower", "with workers"},
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

// The coordinator says it still waits for workers after a refusal only
// when it does: before its worker joined, not mid-run.
func TestDemoCoordinatorSaysStillWaitingOnlyWhenItWaits(t *testing.T) {
	// 40 batches of 200 ms: the job runs for 8 s at least.
	coord := startCoordinator(t, "200ms", "4000")
	if _, errOut, code := tm(t, "", "demo", "worker", "--coordinator", coord.addr, "--slot", "3", "--dir", t.TempDir()); code != exitError {
		t.Fatalf("demo worker --slot 3: exit %d\n%s", code, errOut)
	}
	good := make(chan int, 1)
	go func() {
		_, _, code := tm(t, "", "demo", "worker", "--coordinator", coord.addr, "--slot", "0", "--dir", t.TempDir())
		good <- code
	}()
	time.Sleep(time.Second)
	if _, errOut, code := tm(t, "", "demo", "worker", "--coordinator", coord.addr, "--slot", "5", "--dir", t.TempDir()); code != exitError {
		t.Fatalf("demo worker --slot 5: exit %d\n%s", code, errOut)
	}
	if code := <-good; code != 0 {
		t.Errorf("the good worker: exit %d", code)
	}
	c := <-coord.done
	if c.code != 0 {
		t.Fatalf("coordinator: exit %d\n%s", c.code, c.stderr)
	}
	if l := lineWith(c.stderr, "slot 3 out of range"); !strings.Contains(l, "; still waiting for the worker of slot 0") {
		t.Errorf("refusal before the join: %q, want it to say it still waits for slot 0:\n%s", l, c.stderr)
	}
	if l := lineWith(c.stderr, "slot 5 out of range"); l == "" || strings.Contains(l, "waiting") {
		t.Errorf("refusal mid-run: %q, want it without a wait:\n%s", l, c.stderr)
	}
}

// With --worker-listen, a lost worker's coordinator says it waits for a
// new worker of the slot, how to start one and for how long.
func TestDemoListeningCoordinatorSaysHowToReplaceALostWorker(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	coord := startCoordinator(t, "200ms", "4000")
	first := exec.Command(exe, "demo", "worker", "--coordinator", coord.addr, "--slot", "0", "--dir", t.TempDir())
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = first.Process.Kill(); _ = first.Wait() })
	time.Sleep(2 * time.Second) // joined, opened, some batches
	_ = first.Process.Kill()
	_ = first.Wait()
	// The coordinator notices at its next batch (one every 200 ms): a
	// worker started before would be the slot's standby.
	time.Sleep(1500 * time.Millisecond)
	if _, errOut, code := tm(t, "", "demo", "worker", "--coordinator", coord.addr, "--slot", "0", "--dir", t.TempDir()); code != 0 {
		t.Fatalf("the new worker: exit %d\n%s", code, errOut)
	}
	c := <-coord.done
	want := "waiting up to 2m0s (--worker-join-timeout) for a new worker of slot 0: start one with tidemark demo worker --coordinator " + coord.addr + " --slot 0"
	if c.code != 0 || !strings.Contains(lineWith(c.stderr, "lost"), want) || strings.Contains(c.stderr, "a new worker takes over") {
		t.Fatalf("coordinator: exit %d, want 0 and a loss saying %q:\n%s", c.code, want, c.stderr)
	}
}

// A --worker-listen coordinator refused for the job's shape refuses
// before it says it waits for workers.
func TestDemoListeningCoordinatorRefusesBeforeItWaits(t *testing.T) {
	store := fileURL(t.TempDir())
	if _, errOut, code := tm(t, "", demoArgs(t.TempDir(), store, "--crash-after-records", "10000")...); code != exitCrashed {
		t.Fatalf("crashing demo: exit %d\n%s", code, errOut)
	}
	_, errOut, code := tm(t, "", demoArgs(t.TempDir(), store, "--workers", "2", "--worker-listen", freeAddr(t))...)
	if code != exitError || !strings.Contains(errOut, "this job runs in one process") || strings.Contains(errOut, "waiting") || strings.Contains(errOut, "warning") {
		t.Fatalf("--worker-listen on a one-process job: exit %d, want %d and the refusal alone:\n%s", code, exitError, errOut)
	}
}
