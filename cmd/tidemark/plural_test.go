package main

import (
	"strings"
	"testing"
)

// Counts of one are singular in the demo's output: "1 checkpoint this
// run by 1 worker", "1 committed transaction".
func TestDemoOutputSaysOneInTheSingular(t *testing.T) {
	out, errOut, code := tm(t, "", demoArgs(t.TempDir(), fileURL(t.TempDir()), "--records", "3000", "--workers", "1",
		"--checkpoint-every", "0", "--interval", "10s")...) // one checkpoint: at the end
	if code != 0 {
		t.Fatalf("demo: exit %d\n%s", code, errOut)
	}
	all := out + errOut
	for _, want := range []string{"(1 committed transaction)", ": 1 checkpoint this run by 1 worker (0 replaced)"} {
		if !strings.Contains(all, want) {
			t.Errorf("demo does not say %q:\n%s", want, all)
		}
	}
	for _, bad := range []string{"1 workers", "1 checkpoints", "1 committed transactions", " 1 objects"} {
		if strings.Contains(all, bad) {
			t.Errorf("demo says %q:\n%s", bad, all)
		}
	}
}

func TestPlural(t *testing.T) {
	for n, want := range map[int]string{0: "0 checkpoints", 1: "1 checkpoint", 2: "2 checkpoints"} {
		if got := plural(n, "checkpoint"); got != want {
			t.Errorf("plural(%d) = %q, want %q", n, got, want)
		}
	}
}
