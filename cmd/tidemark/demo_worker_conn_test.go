package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A worker's --coordinator that is not HOST:PORT is a usage error at
// once (it used to retry a dial for a minute), and nothing is written.
func TestDemoWorkerCoordinatorMustBeHostPort(t *testing.T) {
	for _, addr := range []string{"nonsense", "coordinator:", "coordinator:http", "coordinator:0", "coordinator:70700", "[::1"} {
		dir := filepath.Join(t.TempDir(), "w")
		start := time.Now()
		_, errOut, code := tm(t, "", "demo", "worker", "--coordinator", addr, "--slot", "0", "--dir", dir)
		if code != exitUsage || !strings.Contains(errOut, "--coordinator "+addr) || time.Since(start) > 5*time.Second {
			t.Fatalf("demo worker --coordinator %s: exit %d after %v, want %d at once naming it:\n%s", addr, code, time.Since(start), exitUsage, errOut)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Fatalf("demo worker --coordinator %s created its --dir (%v)", addr, err)
		}
	}
}

// A worker's --metrics-addr is checked as the coordinator's is, before
// it connects or touches its --dir.
func TestDemoWorkerMetricsAddrMustBeHostPort(t *testing.T) {
	for _, addr := range []string{"nonsense", "127.0.0.1:99999", "127.0.0.1:http"} {
		dir := filepath.Join(t.TempDir(), "w")
		_, errOut, code := tm(t, "", "demo", "worker", "--coordinator", "127.0.0.1:7070", "--slot", "0", "--dir", dir, "--metrics-addr", addr)
		if code != exitUsage || !strings.Contains(errOut, "--metrics-addr") {
			t.Fatalf("demo worker --metrics-addr %s: exit %d, want %d naming the flag:\n%s", addr, code, exitUsage, errOut)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Fatalf("demo worker --metrics-addr %s created its --dir (%v)", addr, err)
		}
	}
}

// A worker whose coordinator is not there yet says at once that it waits
// for it, and for how long; stopped by --timeout it still says why it
// could not connect.
func TestDemoWorkerSaysItWaitsForAnUnreachableCoordinator(t *testing.T) {
	addr := freeAddr(t) // closed: nothing listens there
	_, errOut, code := tmEnv(t, natsCreds, "--timeout", "1s", "demo", "worker", "--coordinator", addr, "--slot", "0", "--dir", t.TempDir())
	wait := "waiting for the coordinator at " + addr + " (up to 1m0s)…"
	why := "the coordinator at " + addr + " was unreachable ("
	if code == 0 || !strings.Contains(errOut, wait) || !strings.Contains(errOut, "timed out (--timeout) after 1s") || !strings.Contains(errOut, why) {
		t.Fatalf("demo worker --timeout 1s on a closed port: exit %d, want the wait (%q) and the reason (%q):\n%s", code, wait, why, errOut)
	}
	if strings.Count(errOut, "waiting for the coordinator") != 1 {
		t.Errorf("the wait said more than once:\n%s", errOut)
	}
}
