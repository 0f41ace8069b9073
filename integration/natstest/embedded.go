package natstest

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

// embeddedBackend runs the server library inside the test binary.
type embeddedBackend struct {
	opts server.Options

	mu  sync.Mutex
	srv *server.Server
}

// StartEmbedded starts a server inside the test binary (no separate
// process or binary needed) on a free port of 127.0.0.1, with its store in
// a temporary directory, and shuts it down in t.Cleanup.
func StartEmbedded(t testing.TB, opts ...Options) *Server {
	t.Helper()
	port, err := freePort()
	if err != nil {
		t.Fatalf("natstest: choose a port: %v", err)
	}
	o := options(opts)
	e := &embeddedBackend{opts: server.Options{
		ServerName: "tidemark-embedded",
		Host:       "127.0.0.1",
		Port:       port,
		JetStream:  true,
		StoreDir:   filepath.Join(t.TempDir(), "jetstream"),
		Username:   DefaultUser,
		Password:   DefaultPassword,
		NoLog:      true,
		NoSigs:     true,
	}}
	e.opts.JetStreamLimits.MaxBatchSize = o.MaxBatch
	s := &Server{URL: "nats://" + hostPort(port), User: DefaultUser, Password: DefaultPassword, mode: ModeEmbedded, b: e}
	if err := e.start(t.Context()); err != nil {
		t.Fatal(err)
	}
	registerCleanup(t, s)
	if err := s.waitReady(t.Context()); err != nil {
		t.Fatal(err)
	}
	return s
}

func (e *embeddedBackend) start(context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.srv != nil && e.srv.Running() {
		return errors.New("natstest: embedded server is still running")
	}
	// The server keeps a pointer to its options; each run gets a copy.
	o := e.opts
	srv, err := server.NewServer(&o)
	if err != nil {
		return fmt.Errorf("natstest: embedded server: %w", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(readyTimeout) {
		srv.Shutdown()
		return errors.New("natstest: embedded server not ready for connections")
	}
	e.srv = srv
	return nil
}

// stop shuts the server down; an embedded server cannot be killed, so
// graceful and abrupt stops are the same shutdown.
func (e *embeddedBackend) stop(context.Context, bool) error {
	e.mu.Lock()
	srv := e.srv
	e.mu.Unlock()
	if srv == nil {
		return nil
	}
	srv.Shutdown()
	srv.WaitForShutdown()
	return nil
}

func (e *embeddedBackend) terminate(ctx context.Context) error { return e.stop(ctx, true) }

func (e *embeddedBackend) exited() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.srv == nil || !e.srv.Running() {
		return errors.New("not running")
	}
	return nil
}

func (e *embeddedBackend) logs() string { return "(embedded server: logging off)" }

func (e *embeddedBackend) id() string {
	return fmt.Sprintf("embedded nats server on %s:%d", e.opts.Host, e.opts.Port)
}
