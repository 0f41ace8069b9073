package natstest

import (
	"context"
	"debug/buildinfo"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// NATSVersion is the nats-server module version the tests run. Keep it equal
// to the pin in scripts/install-nats-server.sh and to go.mod (a test checks).
const NATSVersion = "v2.15.2"

// Environment variables read by the harness.
const (
	EnvMode  = "TIDEMARK_NATS"     // "process" (default), "docker", "embedded"
	EnvBin   = "TIDEMARK_NATS_BIN" // a nats-server binary other than the cache's
	EnvCache = "TIDEMARK_CACHE"    // cache root, default $HOME/.cache/tidemark
	// EnvBenchRecords sets how many input records the JetStream benchmarks read.
	EnvBenchRecords = "TIDEMARK_BENCH_NATS_RECORDS"
)

// BenchRecords returns the number of records EnvBenchRecords asks for, or
// def when it is unset. It fails the benchmark on anything but a positive number.
func BenchRecords(b testing.TB, def int) int {
	b.Helper()
	s := os.Getenv(EnvBenchRecords)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive number", EnvBenchRecords, s)
	}
	return n
}

// Modes a Server runs in.
const (
	ModeProcess  = "process"
	ModeDocker   = "docker"
	ModeEmbedded = "embedded"
)

// Credentials every server requires.
const (
	DefaultUser     = "tidemark"
	DefaultPassword = "tidemark-nats-secret"
)

const (
	serverModule = "github.com/nats-io/nats-server/v2"
	installHint  = "install it with: bash scripts/install-nats-server.sh (or make deps)"
	readyTimeout = 60 * time.Second
	stopGrace    = 5 * time.Second
)

var errNoBinary = errors.New("natstest: nats-server binary not available")

// Options vary a server.
type Options struct {
	// MaxBatch is the server's limit on messages in one atomic batch
	// (jetstream.limits.batch.max_msgs); 0 keeps the server's default.
	MaxBatch int
}

// Server is a running NATS server with JetStream.
type Server struct {
	// URL is where clients on this host connect: nats://127.0.0.1:port.
	URL string
	// User and Password are the credentials the server requires.
	User, Password string

	mode string
	b    backend
}

// backend is one way of running a server.
type backend interface {
	stop(ctx context.Context, graceful bool) error
	start(ctx context.Context) error
	terminate(ctx context.Context) error
	exited() error // non-nil once the server died by itself
	logs() string
	id() string
}

// Mode reports how the server runs: ModeProcess, ModeDocker or ModeEmbedded.
func (s *Server) Mode() string { return s.mode }

// PID returns the process id of a process-mode server while it runs, or 0.
func (s *Server) PID() int {
	if p, ok := s.b.(*processBackend); ok {
		return p.pid()
	}
	return 0
}

// ContainerID returns the Docker container id, or "" in other modes.
func (s *Server) ContainerID() string {
	if c, ok := s.b.(*containerBackend); ok {
		return c.containerID
	}
	return ""
}

// Start starts a server for this test alone, in the mode TIDEMARK_NATS
// selects, and removes it in t.Cleanup.
func Start(t testing.TB, opts ...Options) *Server {
	t.Helper()
	switch m := os.Getenv(EnvMode); m {
	case "", ModeProcess:
		return StartProcess(t, opts...)
	case ModeDocker:
		return StartDocker(t, opts...)
	case ModeEmbedded:
		return StartEmbedded(t, opts...)
	default:
		t.Fatalf("natstest: %s=%q: want %q, %q or %q", EnvMode, m, ModeProcess, ModeDocker, ModeEmbedded)
		return nil
	}
}

func options(opts []Options) Options {
	if len(opts) > 0 {
		return opts[0]
	}
	return Options{}
}

// config renders a server configuration. listen is host:port; storeDir is
// the JetStream store as the server sees it.
func config(listen, storeDir string, o Options) string {
	return configNamed("tidemark-test", listen, storeDir, o, "")
}

// configNamed renders a configuration with a server name and extra
// top-level blocks (a cluster's).
func configNamed(name, listen, storeDir string, o Options, extra string) string {
	limits := ""
	if o.MaxBatch > 0 {
		limits = fmt.Sprintf("\n  limits { batch { max_msgs: %d } }", o.MaxBatch)
	}
	return fmt.Sprintf(`listen: %q
server_name: %q
jetstream {
  store_dir: %q%s
}
authorization {
  users = [ { user: %q, password: %q } ]
}
%s`, listen, name, storeDir, limits, DefaultUser, DefaultPassword, extra)
}

func registerCleanup(t testing.TB, s *Server) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.b.terminate(ctx); err != nil {
			t.Errorf("natstest: remove %s: %v", s.b.id(), err)
		}
	})
}

// Connect returns an authenticated connection, closed in t.Cleanup. It
// retries while the server is down (a test may restart it under a client).
func (s *Server) Connect(t testing.TB) *nats.Conn {
	t.Helper()
	nc, err := s.dial(nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatalf("natstest: connect to %s: %v", s.URL, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// JetStream returns a JetStream context on a new authenticated connection.
func (s *Server) JetStream(t testing.TB) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(s.Connect(t))
	if err != nil {
		t.Fatalf("natstest: jetstream: %v", err)
	}
	return js
}

func (s *Server) dial(opts ...nats.Option) (*nats.Conn, error) {
	opts = append([]nats.Option{nats.UserInfo(s.User, s.Password), nats.Timeout(5 * time.Second)}, opts...)
	return nats.Connect(s.URL, opts...)
}

// Kill stops the server at once (SIGKILL, or a killed container, or an
// abrupt shutdown of an embedded one), keeping its store for Restart.
func (s *Server) Kill(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := s.b.stop(ctx, false); err != nil {
		t.Fatalf("natstest: kill %s: %v", s.b.id(), err)
	}
}

// Restart starts a stopped server again on the same port and store and
// waits until JetStream answers.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	ctx := t.Context()
	if err := s.b.start(ctx); err != nil {
		t.Fatalf("natstest: restart %s: %v", s.b.id(), err)
	}
	if err := s.waitReady(ctx); err != nil {
		t.Fatal(err)
	}
}

// waitReady polls until an authenticated client gets JetStream account
// information, or fails with the server's log.
func (s *Server) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	var last error
	for {
		last = s.probe(ctx)
		if last == nil {
			return nil
		}
		if err := s.b.exited(); err != nil {
			return fmt.Errorf("natstest: %s died before it was ready: %v\n--- server output ---\n%s", s.b.id(), err, s.b.logs())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("natstest: %s not ready at %s after %v: %v\n--- server output ---\n%s", s.b.id(), s.URL, readyTimeout, last, s.b.logs())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (s *Server) probe(ctx context.Context) error {
	nc, err := s.dial(nats.NoReconnect())
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = js.AccountInfo(pctx)
	return err
}

// BinaryPath finds the nats-server binary: TIDEMARK_NATS_BIN, else the
// cache path scripts/install-nats-server.sh installs to, which must hold
// NATSVersion.
func BinaryPath() (string, error) {
	if p := os.Getenv(EnvBin); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%w: %s=%s: %v; %s", errNoBinary, EnvBin, p, err, installHint)
		}
		return p, nil
	}
	p := filepath.Join(cacheDir(), "bin", "nats-server")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%w: no binary at %s; %s", errNoBinary, p, installHint)
	}
	if v := binaryVersion(p); v != NATSVersion {
		return "", fmt.Errorf("%w: %s is version %q, want %s; %s", errNoBinary, p, v, NATSVersion, installHint)
	}
	return p, nil
}

// binaryVersion returns the nats-server module version in the binary's
// build info, or "" when it has none.
func binaryVersion(bin string) string {
	info, err := buildinfo.ReadFile(bin)
	if err != nil || info.Main.Path != serverModule {
		return ""
	}
	return info.Main.Version
}

func cacheDir() string {
	if d := os.Getenv(EnvCache); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "tidemark-cache")
	}
	return filepath.Join(home, ".cache", "tidemark")
}

// freePort asks the kernel for a free TCP port on 127.0.0.1. Another
// process may take it before the server binds it; the start then fails
// with the server's log saying so.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func hostPort(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }
