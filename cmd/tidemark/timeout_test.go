package main

import (
	"net"
	"strings"
	"testing"
	"time"
)

// stalledEndpoint accepts connections and never answers, as a hung server
// or a half-open load balancer does. It returns its http:// URL.
func stalledEndpoint(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c) // held open, never read or answered
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + ln.Addr().String()
}

// Against an endpoint that accepts and never answers, every command gives
// up within --timeout and says that it timed out (finding 4: ls ran 150 s
// before failing with a bare EOF).
func TestCommandsGiveUpOnAStalledEndpointWithinTimeout(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test-secret")
	t.Setenv("AWS_REGION", "us-east-1")
	store := "s3://bucket/job?path_style=true&endpoint=" + stalledEndpoint(t)
	for _, args := range [][]string{{"ls"}, {"show", "latest"}, {"gc"}, {"savepoint", "ls"}} {
		t.Run(args[0], func(t *testing.T) {
			start := time.Now()
			_, errOut, code := tm(t, store, append(args, "--timeout", "2s")...)
			took := time.Since(start)
			if code != exitError || !strings.Contains(errOut, "timed out") {
				t.Fatalf("%v: exit %d after %v, want %d and an error saying it timed out:\n%s", args, code, took, exitError, errOut)
			}
			// Generous: the bound is 2 s; a hang would be minutes.
			if took > 30*time.Second {
				t.Fatalf("%v took %v with --timeout 2s", args, took)
			}
		})
	}
}

// A demo that --timeout stops says it timed out, not that it was
// interrupted, and keeps the resume hint.
func TestDemoStoppedByTimeoutSaysSo(t *testing.T) {
	args := append(demoArgs(t.TempDir(), fileURL(t.TempDir())), "--slow", "100ms", "--timeout", "1s")
	_, errOut, code := tm(t, "", args...)
	if code != exitError || !strings.Contains(errOut, "timed out (--timeout) after 1s at record") ||
		!strings.Contains(errOut, "Run the same command again to resume") || strings.Contains(errOut, "interrupted") {
		t.Fatalf("demo --timeout 1s: exit %d, want %d saying it timed out and how to resume:\n%s", code, exitError, errOut)
	}
}
