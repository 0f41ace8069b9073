package main

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// coordinator is a demo coordinator run by startCoordinator.
type coordinator struct {
	addr string // where it waits for its worker
	done chan coordinatorExit
}

type coordinatorExit struct {
	stderr string
	code   int
}

// startCoordinator runs a demo job of one worker that it waits for (see
// --worker-listen) in the background, sleeping slow per batch and
// checkpointing every `every` records.
func startCoordinator(t *testing.T, slow, every string) coordinator {
	return startCoordinatorEnv(t, nil, slow, every)
}

// startCoordinatorEnv is startCoordinator with vars as the environment.
func startCoordinatorEnv(t *testing.T, vars map[string]string, slow, every string) coordinator {
	c := coordinator{addr: freeAddr(t), done: make(chan coordinatorExit, 1)}
	go func() {
		_, errOut, code := tmEnv(t, vars, "demo", "--dir", t.TempDir(), "--store", fileURL(t.TempDir()), "--records", "20000", "--words", "300",
			"--batch", "500", "--checkpoint-every", every, "--interval", "1h", "--slow", slow, "--workers", "1", "--worker-listen", c.addr)
		c.done <- coordinatorExit{errOut, code}
	}()
	return c
}

// startWorker runs the worker of slot for the coordinator at addr in the
// background; its exit code arrives on the channel.
func startWorker(t *testing.T, addr string, slot int) <-chan int {
	code := make(chan int, 1)
	go func() {
		_, _, c := tm(t, "", "demo", "worker", "--coordinator", addr, "--slot", strconv.Itoa(slot), "--dir", t.TempDir())
		code <- c
	}()
	return code
}

// A worker started with a slot out of range says why it was refused
// (exit 1), the coordinator says so too and goes on waiting for the
// worker of its slot.
func TestDemoWorkerWithASlotOutOfRangeIsRefusedOnBothSides(t *testing.T) {
	coord := startCoordinator(t, "0", "4000")
	want := "slot 3 out of range: this job has slots 0..0"
	_, errOut, code := tm(t, "", "demo", "worker", "--coordinator", coord.addr, "--slot", "3", "--dir", t.TempDir())
	if code != exitError || !strings.Contains(errOut, want) || strings.Contains(errOut, "unknown operation") || strings.Contains(errOut, "coordinator gone") {
		t.Fatalf("demo worker --slot 3: exit %d, want %d saying %q:\n%s", code, exitError, want, errOut)
	}
	if _, errOut, code := tm(t, "", "demo", "worker", "--coordinator", coord.addr, "--slot", "0", "--dir", t.TempDir()); code != 0 {
		t.Fatalf("demo worker --slot 0: exit %d\n%s", code, errOut)
	}
	c := <-coord.done
	if c.code != 0 || !strings.Contains(c.stderr, "refused a worker that connected: "+want) {
		t.Fatalf("coordinator: exit %d, want 0 and the refusal of slot 3:\n%s", c.code, c.stderr)
	}
	if w := "warning: $" + workerTokenEnv + " is not set: any process that reaches " + coord.addr + " can join this job"; !strings.Contains(c.stderr, w) {
		t.Errorf("coordinator without a worker token: stderr lacks %q:\n%s", w, c.stderr)
	}
}

// With $TIDEMARK_WORKER_TOKEN set on the coordinator, a worker without
// it, or with another, is refused before it is given anything; one with
// it joins, and the coordinator does not warn.
func TestDemoWorkerNeedsTheCoordinatorsToken(t *testing.T) {
	coord := startCoordinatorEnv(t, map[string]string{workerTokenEnv: "s3cret-token"}, "0", "4000")
	want := "worker token missing or wrong"
	for _, token := range []string{"", "wrong-token", "s3cret-tokenX"} {
		_, errOut, code := tmEnv(t, map[string]string{workerTokenEnv: token}, "demo", "worker", "--coordinator", coord.addr, "--slot", "0", "--dir", t.TempDir())
		if code != exitError || !strings.Contains(errOut, want) {
			t.Fatalf("demo worker with token %q: exit %d, want %d saying %q:\n%s", token, code, exitError, want, errOut)
		}
	}
	if _, errOut, code := tmEnv(t, map[string]string{workerTokenEnv: "s3cret-token"}, "demo", "worker", "--coordinator", coord.addr, "--slot", "0", "--dir", t.TempDir()); code != 0 {
		t.Fatalf("demo worker with the token: exit %d\n%s", code, errOut)
	}
	c := <-coord.done
	if c.code != 0 || !strings.Contains(c.stderr, "refused a worker that connected: "+want) || strings.Contains(c.stderr, "warning:") {
		t.Fatalf("coordinator: exit %d, want 0, the refusals and no warning:\n%s", c.code, c.stderr)
	}
	if strings.Contains(c.stderr, "s3cret") {
		t.Errorf("the coordinator printed the token:\n%s", c.stderr)
	}
}

// A worker with a bad slot that connects while the job runs is refused at
// once, not when the coordinator next waits for workers (which may be
// never): it exits saying why while the job goes on.
func TestDemoWorkerWithABadSlotMidRunIsRefusedAtOnce(t *testing.T) {
	// 40 batches of 200 ms: the job runs for 8 s at least.
	coord := startCoordinator(t, "200ms", "4000")
	good := startWorker(t, coord.addr, 0)
	time.Sleep(time.Second)
	_, errOut, code := tm(t, "", "demo", "worker", "--coordinator", coord.addr, "--slot", "5", "--dir", t.TempDir())
	select {
	case c := <-coord.done:
		t.Fatalf("the job ended before the bad worker was answered (exit %d):\n%s", c.code, c.stderr)
	default:
	}
	want := "slot 5 out of range: this job has slots 0..0"
	if code != exitError || !strings.Contains(errOut, want) {
		t.Fatalf("demo worker --slot 5 mid-run: exit %d, want %d saying %q:\n%s", code, exitError, want, errOut)
	}
	if code := <-good; code != 0 {
		t.Errorf("the good worker: exit %d", code)
	}
	if c := <-coord.done; c.code != 0 || !strings.Contains(c.stderr, "refused a worker that connected: "+want) {
		t.Fatalf("coordinator: exit %d, want 0 and the refusal of slot 5:\n%s", c.code, c.stderr)
	}
}
