package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// demoProc is a `tidemark demo` run as a process of its own (this test
// binary, see childMainEnv), so that it gets real signals.
type demoProc struct {
	cmd    *exec.Cmd
	stdout bytes.Buffer
	mu     sync.Mutex
	stderr bytes.Buffer
	seen   chan struct{} // closed when stderr first shows the awaited line
	copied chan struct{}
}

// startDemo starts the demo with args in a process group of its own and
// closes seen when a line of its stderr contains await.
func startDemo(t *testing.T, await string, args ...string) *demoProc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := &demoProc{cmd: exec.Command(exe, args...), seen: make(chan struct{}), copied: make(chan struct{})}
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p.cmd.Stdout = &p.stdout
	pipe, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := p.cmd.Process.Pid
	t.Cleanup(func() { _ = syscall.Kill(-pid, syscall.SIGKILL) })
	go func() {
		defer close(p.copied)
		var once sync.Once
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			p.mu.Lock()
			p.stderr.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			if strings.Contains(sc.Text(), await) {
				once.Do(func() { close(p.seen) })
			}
		}
		_, _ = io.Copy(io.Discard, pipe)
	}()
	return p
}

func (p *demoProc) errOut() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// await waits for the awaited line.
func (p *demoProc) await(t *testing.T) {
	t.Helper()
	select {
	case <-p.seen:
	case <-time.After(90 * time.Second):
		t.Fatalf("not seen within 90s:\n%s", p.errOut())
	}
}

// wait waits for the process to exit and returns its exit code.
func (p *demoProc) wait(t *testing.T) int {
	t.Helper()
	<-p.copied
	err := p.cmd.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	t.Fatal(err)
	return -1
}

// SIGTERM stops the demo cleanly: it drains, takes a final checkpoint,
// commits it, archives it as the --savepoint-on-stop savepoint and exits
// 0 within --stop-timeout. The job resumed on an empty node starts at
// that checkpoint's offset, the very record the stopped run would have
// read next (nothing it committed is read again), and ends exactly-once.
func TestDemoStopsOnSIGTERMWithAFinalCheckpointAndResumesOnAnEmptyNode(t *testing.T) {
	const stopTimeout = 20 * time.Second
	for _, c := range []struct {
		name  string
		extra []string
		group bool
	}{
		{"one process", nil, false},
		{"workers, SIGTERM to the coordinator", append([]string{"--workers", "2"}, workerArgs...), false},
		// As a container runtime or a terminal's kill of the job does:
		// the workers get the signal too, and serve the drain out.
		{"workers, SIGTERM to the group", append([]string{"--workers", "2"}, workerArgs...), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			store := fileURL(t.TempDir())
			job := []string{"--records", "60000", "--slow", "50ms"}
			args := append(demoArgs(t.TempDir(), store, job...), "--stop-timeout", stopTimeout.String(), "--savepoint-on-stop", "preempted", "--output", "json")
			p := startDemo(t, "checkpoints 1 ", append(args, c.extra...)...)
			p.await(t)
			target := p.cmd.Process.Pid
			if c.group {
				target = -target
			}
			sent := time.Now()
			if err := syscall.Kill(target, syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			code := p.wait(t)
			took := time.Since(sent)
			t.Logf("exit %d %v after SIGTERM", code, took)
			if code != exitOK || took > stopTimeout {
				t.Fatalf("after SIGTERM: exit %d in %v, want 0 within %v\n%s", code, took.Round(time.Millisecond), stopTimeout, p.errOut())
			}
			var stopped struct {
				Stopped    bool   `json:"stopped"`
				End        uint64 `json:"end_offset"`
				Last       string `json:"last_checkpoint"`
				Savepoint  string `json:"savepoint"`
				HasCheck   *bool  `json:"exactly_once"`
				Checkpoint int    `json:"checkpoints"`
			}
			if err := json.Unmarshal(p.stdout.Bytes(), &stopped); err != nil || !stopped.Stopped || stopped.Last == "" || stopped.HasCheck != nil {
				t.Fatalf("stopped run's summary %+v (%v), want a stop at a final checkpoint:\n%s\n%s", stopped, err, p.stdout.String(), p.errOut())
			}
			if stopped.End == 0 || stopped.End >= 60000 {
				t.Fatalf("stopped at record %d: want mid-way (the test proves nothing)", stopped.End)
			}
			if strings.Contains(p.errOut(), "interrupted") {
				t.Errorf("a clean stop says it was interrupted:\n%s", p.errOut())
			}

			// The final checkpoint is the latest completed one, at the
			// record the run stopped at, and the savepoint archives it.
			var show struct {
				Checkpoint checkpointInfo `json:"checkpoint"`
				Offsets    struct {
					Next uint64 `json:"next"`
				} `json:"offsets"`
			}
			mustJSON(t, store, &show, "show", "latest-completed")
			// (A job with workers keeps offsets per slot and partition.)
			if show.Checkpoint.ID != stopped.Last || c.extra == nil && show.Offsets.Next != stopped.End {
				t.Fatalf("latest completed %s at %d, want the final checkpoint %s at %d", show.Checkpoint.ID, show.Offsets.Next, stopped.Last, stopped.End)
			}
			var sp map[string]any
			mustJSON(t, store, &sp, "verify", "preempted")
			if sp["checkpoint"] != stopped.Last {
				t.Fatalf("savepoint preempted: %v, want checkpoint %s", sp, stopped.Last)
			}

			// An empty node resumes at the final checkpoint.
			var resumed struct {
				OK       bool   `json:"exactly_once"`
				Restored string `json:"restored"`
				Start    uint64 `json:"start_offset"`
				Records  uint64 `json:"records"`
			}
			mustJSON(t, "", &resumed, append(demoArgs(t.TempDir(), store, "--records", "60000"), c.extra...)...)
			if !resumed.OK || resumed.Records != 60000 || resumed.Restored != stopped.Last || resumed.Start != stopped.End {
				t.Fatalf("resumed %+v: want exactly-once over 60000 records from %s at record %d", resumed, stopped.Last, stopped.End)
			}
		})
	}
}

// A drain that outlasts --stop-timeout falls back to the crash-safe
// stop: exit 143, the resume hint, nothing lost.
func TestDemoStopTimeoutFallsBackToTheCrashSafeStop(t *testing.T) {
	store := fileURL(t.TempDir())
	args := append(demoArgs(t.TempDir(), store, "--records", "60000", "--slow", "50ms"), "--stop-timeout", "1ns")
	p := startDemo(t, "to stop cleanly instead", args...)
	p.await(t)
	if err := syscall.Kill(p.cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 128+int(syscall.SIGTERM) {
		t.Fatalf("exit %d, want %d\n%s", code, 128+int(syscall.SIGTERM), p.errOut())
	}
	if !strings.Contains(p.errOut(), "Run the same command again to resume.") {
		t.Fatalf("no resume hint:\n%s", p.errOut())
	}
	if out, errOut, code := tm(t, "", demoArgs(t.TempDir(), store, "--records", "60000")...); code != 0 || !strings.Contains(out, "exactly-once: OK") {
		t.Fatalf("resumed: exit %d\n%s\n%s", code, out, errOut)
	}
}

// The first SIGTERM of a command that drains starts the drain, without
// cancelling; a second signal, or the stop timeout, cancels with
// SIGTERM's exit code; SIGINT cancels at once, drain or not.
func TestSignalsDrainOnTheFirstSIGTERMOnly(t *testing.T) {
	for _, c := range []struct {
		name    string
		timeout time.Duration
		sigs    []os.Signal
		want    int // exit code; 0: not cancelled
	}{
		{"first SIGTERM drains", time.Hour, []os.Signal{syscall.SIGTERM}, 0},
		{"second SIGTERM stops", time.Hour, []os.Signal{syscall.SIGTERM, syscall.SIGTERM}, 143},
		{"SIGINT while draining stops", time.Hour, []os.Signal{syscall.SIGTERM, syscall.SIGINT}, 130},
		{"SIGINT stops at once", time.Hour, []os.Signal{syscall.SIGINT}, 130},
		{"the stop timeout stops", time.Millisecond, []os.Signal{syscall.SIGTERM}, 143},
	} {
		t.Run(c.name, func(t *testing.T) {
			ch := make(chan os.Signal)
			s := signalsOn(ch)
			defer s.stop()
			drain := s.drainOn(c.timeout)
			for _, sig := range c.sigs {
				ch <- sig
			}
			if c.sigs[0] == syscall.SIGTERM {
				select {
				case <-drain:
				case <-time.After(10 * time.Second):
					t.Fatal("SIGTERM did not start the drain")
				}
			}
			if c.want == 0 {
				time.Sleep(50 * time.Millisecond) // cancelled by then, were it to be
				if err := s.ctx.Err(); err != nil {
					t.Fatalf("cancelled (%v) by the first SIGTERM", context.Cause(s.ctx))
				}
				return
			}
			select {
			case <-s.ctx.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("not cancelled")
			}
			if got := exitCode(s.ctx, fmt.Errorf("demo: %w", context.Canceled)); got != c.want {
				t.Fatalf("exit %d (%v), want %d", got, context.Cause(s.ctx), c.want)
			}
		})
	}
	// A command that does not drain stops at the first SIGTERM.
	ch := make(chan os.Signal)
	s := signalsOn(ch)
	defer s.stop()
	ch <- syscall.SIGTERM
	<-s.ctx.Done()
	if got := exitCode(s.ctx, context.Canceled); got != 143 {
		t.Fatalf("SIGTERM without a drain: exit %d, want 143", got)
	}
}
