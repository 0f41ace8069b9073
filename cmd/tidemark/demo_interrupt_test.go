package main

import (
	"strings"
	"syscall"
	"testing"
)

// Ctrl-C (SIGINT) stops the demo with exit 130 and one message: the
// "interrupted at record … Run the same command again to resume." line,
// nothing after it — not "context canceled" from the coordinator or its
// workers, nor "coordinator gone" from workers that saw it stop. Ctrl-C
// in a terminal signals the whole process group (coordinator and
// workers); kill -INT only the coordinator.
func TestDemoInterruptedSaysSoOnce(t *testing.T) {
	for _, c := range []struct {
		name  string
		extra []string
		group bool
	}{
		{"one process", nil, false},
		{"workers, Ctrl-C to the group", append([]string{"--workers", "2"}, workerArgs...), true},
		{"workers, SIGINT to the coordinator", append([]string{"--workers", "2"}, workerArgs...), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append(demoArgs(t.TempDir(), fileURL(t.TempDir()), "--records", "2000000", "--slow", "20ms"), c.extra...)
			p := startDemo(t, "checkpoints 1 ", args...)
			p.await(t)
			target := p.cmd.Process.Pid
			if c.group {
				target = -target
			}
			if err := syscall.Kill(target, syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			if code := p.wait(t); code != exitInterrupted {
				t.Fatalf("exit %d, want %d\n%s", code, exitInterrupted, p.errOut())
			}
			out := p.errOut()
			_, after, ok := strings.Cut(out, "interrupted at record ")
			if !ok || !strings.Contains(after, "Run the same command again to resume.\n") {
				t.Fatalf("no interruption line:\n%s", out)
			}
			_, tail, _ := strings.Cut(after, "\n")
			if strings.Count(out, "interrupted") != 1 || tail != "" {
				t.Fatalf("more than the interruption line was printed:\n%s", out)
			}
		})
	}
}
