package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Ctrl-C (SIGINT) stops the demo with exit 130 and one message: the
// "interrupted at record … Run the same command again to resume." line,
// nothing after it — not "context canceled" from the coordinator or its
// workers, nor "coordinator gone" from workers that saw it stop. Ctrl-C
// in a terminal signals the whole process group (coordinator and
// workers); kill -INT only the coordinator.
func TestDemoInterruptedSaysSoOnce(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		extra []string
		group bool
	}{
		{"one process", nil, false},
		{"workers, Ctrl-C to the group", []string{"--workers", "2"}, true},
		{"workers, SIGINT to the coordinator", []string{"--workers", "2"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append(demoArgs(t.TempDir(), fileURL(t.TempDir()), "--records", "2000000", "--slow", "20ms"), c.extra...)
			cmd := exec.Command(exe, args...)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			pipe, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			pid := cmd.Process.Pid
			t.Cleanup(func() { _ = syscall.Kill(-pid, syscall.SIGKILL) })
			var mu sync.Mutex
			var all bytes.Buffer
			checkpointed := make(chan struct{})
			copied := make(chan struct{})
			go func() {
				defer close(copied)
				sc := bufio.NewScanner(pipe)
				once := sync.Once{}
				for sc.Scan() {
					mu.Lock()
					all.WriteString(sc.Text() + "\n")
					mu.Unlock()
					if strings.Contains(sc.Text(), "checkpoints 1 ") {
						once.Do(func() { close(checkpointed) })
					}
				}
				_, _ = io.Copy(io.Discard, pipe)
			}()
			select {
			case <-checkpointed:
			case <-time.After(60 * time.Second):
				mu.Lock()
				defer mu.Unlock()
				t.Fatalf("no checkpoint within a minute:\n%s", all.String())
			}
			target := pid
			if c.group {
				target = -pid
			}
			if err := syscall.Kill(target, syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			<-copied
			err = cmd.Wait()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted {
				t.Fatalf("exit: %v, want %d\n%s", err, exitInterrupted, all.String())
			}
			out := all.String()
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
