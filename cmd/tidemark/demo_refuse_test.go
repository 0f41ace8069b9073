package main

import (
	"net"
	"strings"
	"testing"
)

// A worker started with a slot out of range says why it was refused
// (exit 1), the coordinator says so too and goes on waiting for the
// worker of its slot.
func TestDemoWorkerWithASlotOutOfRangeIsRefusedOnBothSides(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	type out struct {
		stderr string
		code   int
	}
	coord := make(chan out, 1)
	go func() {
		_, errOut, code := tm(t, "", demoArgs(t.TempDir(), fileURL(t.TempDir()), "--workers", "1", "--worker-listen", addr)...)
		coord <- out{errOut, code}
	}()
	want := "slot 3 out of range: this job has slots 0..0"
	_, errOut, code := tm(t, "", "demo", "worker", "--coordinator", addr, "--slot", "3", "--dir", t.TempDir())
	if code != exitError || !strings.Contains(errOut, want) || strings.Contains(errOut, "unknown operation") || strings.Contains(errOut, "coordinator gone") {
		t.Fatalf("demo worker --slot 3: exit %d, want %d saying %q:\n%s", code, exitError, want, errOut)
	}
	if _, errOut, code := tm(t, "", "demo", "worker", "--coordinator", addr, "--slot", "0", "--dir", t.TempDir()); code != 0 {
		t.Fatalf("demo worker --slot 0: exit %d\n%s", code, errOut)
	}
	c := <-coord
	if c.code != 0 || !strings.Contains(c.stderr, "refused a worker that connected: "+want) {
		t.Fatalf("coordinator: exit %d, want 0 and the refusal of slot 3:\n%s", c.code, c.stderr)
	}
}
