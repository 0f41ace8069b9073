package miniotest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// processBackend runs a server (MinIO or versitygw) as a child process of
// the test binary.
type processBackend struct {
	name    string // "minio", "versitygw", "seaweedfs": for messages
	bin     string
	argv    []string // arguments after the binary
	dataDir string   // MinIO's data; survives stop and start
	logPath string   // stdout and stderr of every run, appended
	addr    string   // 127.0.0.1:port, fixed for the life of the server
	env     []string
	// leftovers are files outside dataDir's parent that terminate
	// removes (see serverKind.leftovers).
	leftovers []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has been waited for
	err  error         // cmd.Wait's result, valid once done is closed
}

var _ backend = (*processBackend)(nil)

// startProcess starts a server of kind k on a free port of 127.0.0.1 with
// its data and log under dir, and waits until it is ready.
func startProcess(ctx context.Context, k *serverKind, dir string) (*Server, error) {
	bin, err := k.binary()
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, fmt.Errorf("miniotest: choose a port: %w", err)
	}
	p := &processBackend{
		name:    k.name,
		bin:     bin,
		dataDir: filepath.Join(dir, "data"),
		logPath: filepath.Join(dir, k.name+".log"),
		addr:    net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		env:     append(os.Environ(), k.processEnv...),
	}
	if p.argv, err = k.processArgs(p.addr, p.dataDir, dir); err != nil {
		return nil, err
	}
	if k.leftovers != nil {
		p.leftovers = k.leftovers(p.argv)
	}
	if err := os.MkdirAll(p.dataDir, 0o755); err != nil {
		return nil, fmt.Errorf("miniotest: data dir: %w", err)
	}
	s := &Server{
		Endpoint:  "http://" + p.addr,
		AccessKey: defaultAccessKey,
		SecretKey: defaultSecretKey,
		Region:    Region,
		mode:      ModeProcess,
		kind:      k,
		b:         p,
	}
	if err := p.start(ctx); err != nil {
		return nil, err
	}
	if err := s.waitReady(ctx); err != nil {
		_ = p.terminate(context.Background())
		return nil, err
	}
	s.running = true
	return s, nil
}

func (p *processBackend) start(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		select {
		case <-p.done:
		default:
			return fmt.Errorf("miniotest: %s is still running", p.idLocked())
		}
	}
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("miniotest: server log: %w", err)
	}
	// Not exec.CommandContext: the server must outlive the context of the
	// call that starts it; it is stopped by PID in stop.
	cmd := exec.Command(p.bin, p.argv...)
	cmd.Env = p.env
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("miniotest: start %s: %w", p.bin, err)
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
		return nil // already exited
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

// terminate stops the process. The data directory belongs to the caller
// (a t.TempDir, or the shared directory Main removes).
func (p *processBackend) terminate(ctx context.Context) error {
	if err := p.stop(ctx, true); err != nil {
		return err
	}
	for _, f := range p.leftovers {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("miniotest: remove %s: %w", f, err)
		}
	}
	return nil
}

func (p *processBackend) exited(context.Context) error {
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

func (p *processBackend) logs(context.Context) string {
	f, err := os.Open(p.logPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	defer f.Close()
	return tail(f, 8<<10)
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
		return p.name + " process (not started) on " + p.addr
	}
	return fmt.Sprintf("%s process pid %d on %s", p.name, p.cmd.Process.Pid, p.addr)
}

// freePort asks the kernel for a free TCP port on 127.0.0.1. The port is
// released before the server binds it, so another process could take it in
// between; the start then fails with the log saying so, which is rare
// enough not to retry.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tail returns at most the last n bytes of r.
func tail(r io.ReadSeeker, n int64) string {
	end, err := r.Seek(0, io.SeekEnd)
	if err != nil {
		return fmt.Sprintf("(unreadable: %v)", err)
	}
	start := max(end-n, 0)
	if _, err := r.Seek(start, io.SeekStart); err != nil {
		return fmt.Sprintf("(unreadable: %v)", err)
	}
	b, _ := io.ReadAll(r)
	return string(b)
}
