package main

import (
	"strings"
	"testing"
	"time"
)

// coordinator is a demo coordinator run by startCoordinator.
type coordinator struct {
	addr string // where its NATS server waits for its worker
	done chan coordinatorExit
}

type coordinatorExit struct {
	stderr string
	code   int
}

// natsCreds are the NATS credentials of the coordinators and workers of
// these tests.
var natsCreds = map[string]string{natsUserEnv: "tm-test", natsPasswordEnv: "s3cret-password"}

// workerArgs are the demo's flags for a job with workers: checkpoints by
// time (only the workers see records), often.
var workerArgs = []string{"--checkpoint-every", "0", "--interval", "300ms"}

// startCoordinator runs a demo job of one worker that it waits for (see
// --worker-listen) in the background, sleeping slow per batch.
func startCoordinator(t *testing.T, slow string) coordinator {
	c := coordinator{addr: freeAddr(t), done: make(chan coordinatorExit, 1)}
	go func() {
		_, errOut, code := tmEnv(t, natsCreds, append([]string{"demo", "--dir", t.TempDir(), "--store", fileURL(t.TempDir()), "--records", "20000", "--words", "300",
			"--batch", "500", "--slow", slow, "--workers", "1", "--worker-listen", c.addr}, workerArgs...)...)
		c.done <- coordinatorExit{errOut, code}
	}()
	return c
}

// A worker started with a slot out of range says why it was refused
// (exit 1); the job runs on with the worker of its slot.
func TestDemoWorkerWithASlotOutOfRangeIsRefused(t *testing.T) {
	coord := startCoordinator(t, "0")
	want := "slot 3 is out of range: the job has 1 worker (slots 0 to 0)"
	_, errOut, code := tmEnv(t, natsCreds, "demo", "worker", "--coordinator", coord.addr, "--slot", "3", "--dir", t.TempDir())
	if code != exitError || !strings.Contains(errOut, want) {
		t.Fatalf("demo worker --slot 3: exit %d, want %d saying %q:\n%s", code, exitError, want, errOut)
	}
	if _, errOut, code := tmEnv(t, natsCreds, "demo", "worker", "--coordinator", coord.addr, "--slot", "0", "--dir", t.TempDir()); code != 0 {
		t.Fatalf("demo worker --slot 0: exit %d\n%s", code, errOut)
	}
	if c := <-coord.done; c.code != 0 {
		t.Fatalf("coordinator: exit %d\n%s", c.code, c.stderr)
	}
}

// The coordinator's NATS server refuses a worker without its credentials,
// or with others, before it learns anything of the job; one with them
// joins. The coordinator never prints the password.
func TestDemoWorkerNeedsTheNATSCredentials(t *testing.T) {
	coord := startCoordinator(t, "0")
	time.Sleep(500 * time.Millisecond) // the server listens
	for _, creds := range []map[string]string{
		{},
		{natsUserEnv: "tm-test", natsPasswordEnv: "wrong"},
		{natsUserEnv: "other", natsPasswordEnv: "s3cret-password"},
	} {
		start := time.Now()
		_, errOut, code := tmEnv(t, creds, "demo", "worker", "--coordinator", coord.addr, "--slot", "0", "--dir", t.TempDir())
		if code != exitError || !strings.Contains(errOut, "refused this worker's credentials") || time.Since(start) > 20*time.Second {
			t.Fatalf("demo worker with %v: exit %d after %v, want %d refused at once:\n%s", creds, code, time.Since(start), exitError, errOut)
		}
	}
	if _, errOut, code := tmEnv(t, natsCreds, "demo", "worker", "--coordinator", coord.addr, "--slot", "0", "--dir", t.TempDir()); code != 0 {
		t.Fatalf("demo worker with the credentials: exit %d\n%s", code, errOut)
	}
	c := <-coord.done
	if c.code != 0 {
		t.Fatalf("coordinator: exit %d\n%s", c.code, c.stderr)
	}
	if strings.Contains(c.stderr, "s3cret") {
		t.Errorf("the coordinator printed the password:\n%s", c.stderr)
	}
}

// --worker-listen without $TIDEMARK_NATS_PASSWORD is a usage error: the
// workers started elsewhere would have no secret to present.
func TestDemoWorkerListenNeedsAPassword(t *testing.T) {
	_, errOut, code := tm(t, "", append([]string{"demo", "--dir", t.TempDir(), "--workers", "1", "--worker-listen", freeAddr(t)}, workerArgs...)...)
	if code != exitUsage || !strings.Contains(errOut, "$"+natsPasswordEnv) {
		t.Fatalf("--worker-listen without a password: exit %d, want %d naming $%s:\n%s", code, exitUsage, natsPasswordEnv, errOut)
	}
}
