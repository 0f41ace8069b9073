package natstest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// processBackend runs nats-server as a child process of the test binary.
type processBackend struct {
	bin     string
	conf    string // configuration file
	logPath string // stdout and stderr of every run, appended
	addr    string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed once cmd has been waited for
	err  error         // cmd.Wait's result, valid once done is closed
}

// StartProcess starts nats-server as a child process on a free port of
// 127.0.0.1, with its store in a temporary directory, and stops it by PID
// in t.Cleanup.
func StartProcess(t testing.TB, opts ...Options) *Server {
	t.Helper()
	bin, err := BinaryPath()
	if err != nil {
		t.Fatal(err)
	}
	port, err := freePort()
	if err != nil {
		t.Fatalf("natstest: choose a port: %v", err)
	}
	dir := t.TempDir()
	s := startProcessConf(t, bin, dir, port, config(hostPort(port), filepath.Join(dir, "jetstream"), options(opts)))
	if err := s.waitReady(t.Context()); err != nil {
		t.Fatal(err)
	}
	return s
}

// startProcessConf starts the binary with configuration conf in dir, and
// stops it in t.Cleanup; the caller waits for readiness.
func startProcessConf(t testing.TB, bin, dir string, port int, conf string) *Server {
	t.Helper()
	p := &processBackend{
		bin:     bin,
		conf:    filepath.Join(dir, "nats.conf"),
		logPath: filepath.Join(dir, "nats.log"),
		addr:    hostPort(port),
	}
	if err := os.WriteFile(p.conf, []byte(conf), 0o600); err != nil {
		t.Fatalf("natstest: write config: %v", err)
	}
	s := &Server{URL: "nats://" + p.addr, User: DefaultUser, Password: DefaultPassword, mode: ModeProcess, b: p}
	if err := p.start(t.Context()); err != nil {
		t.Fatal(err)
	}
	registerCleanup(t, s)
	return s
}

func (p *processBackend) start(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		select {
		case <-p.done:
		default:
			return fmt.Errorf("natstest: %s is still running", p.idLocked())
		}
	}
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("natstest: server log: %w", err)
	}
	// Not exec.CommandContext: the server outlives the call that starts
	// it; it is stopped by PID.
	cmd := exec.Command(p.bin, "-c", p.conf)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("natstest: start %s: %w", p.bin, err)
	}
	done := make(chan struct{})
	p.cmd, p.done = cmd, done
	go func() {
		err := cmd.Wait()
		logf.Close()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

// stop signals the process by its PID and waits for it to exit.
func (p *processBackend) stop(ctx context.Context, graceful bool) error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	default:
	}
	if graceful {
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
			return fmt.Errorf("SIGTERM pid %d: %w", cmd.Process.Pid, err)
		}
		select {
		case <-done:
			return nil
		case <-time.After(stopGrace):
		case <-ctx.Done():
		}
	}
	if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("SIGKILL pid %d: %w", cmd.Process.Pid, err)
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("pid %d did not exit after SIGKILL: %w", cmd.Process.Pid, ctx.Err())
	}
}

func (p *processBackend) terminate(ctx context.Context) error { return p.stop(ctx, true) }

func (p *processBackend) exited() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil {
		return errors.New("not started")
	}
	select {
	case <-p.done:
		if p.err != nil {
			return p.err
		}
		return errors.New("exited with status 0")
	default:
		return nil
	}
}

func (p *processBackend) logs() string {
	f, err := os.Open(p.logPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	defer f.Close()
	end, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return fmt.Sprintf("(unreadable: %v)", err)
	}
	if _, err := f.Seek(max(end-8<<10, 0), io.SeekStart); err != nil {
		return fmt.Sprintf("(unreadable: %v)", err)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

func (p *processBackend) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	select {
	case <-p.done:
		return 0
	default:
		return p.cmd.Process.Pid
	}
}

func (p *processBackend) id() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.idLocked()
}

func (p *processBackend) idLocked() string {
	if p.cmd == nil {
		return "nats-server process (not started) on " + p.addr
	}
	return fmt.Sprintf("nats-server process pid %d on %s", p.cmd.Process.Pid, p.addr)
}
