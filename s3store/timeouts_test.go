package s3store

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/integration/faultproxy"
	"github.com/tidemark-io/tidemark/integration/miniotest"
)

// stallServer is a TCP listener on 127.0.0.1 that accepts connections and
// then does what mode says, forever: "silent" reads nothing and answers
// nothing (a hung server, or a black hole after the handshake);
// "headers" reads the request and answers 200 with headers promising
// a body of a megabyte, sends ten bytes of it and stalls.
type stallServer struct {
	l     net.Listener
	mu    sync.Mutex
	conns []net.Conn
	seen  int
}

func newStallServer(t *testing.T, mode string) *stallServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &stallServer{l: l}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.seen++
			s.mu.Unlock()
			if mode == "headers" {
				go func() {
					br := bufio.NewReader(c)
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, req.Body)
					fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nETag: \"e\"\r\nLast-Modified: Mon, 01 Dec 2026 00:00:00 GMT\r\n\r\n0123456789", 1<<20)
				}()
			}
		}
	}()
	t.Cleanup(func() {
		l.Close()
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, c := range s.conns {
			c.Close()
		}
	})
	return s
}

func (s *stallServer) endpoint() string { return "http://" + s.l.Addr().String() }

func (s *stallServer) connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen
}

// within runs f and fails the test if it has not returned after limit: the
// stalled calls these tests make would otherwise hang for as long as the
// server stays silent (forever, before deadlines existed).
func within(t *testing.T, limit time.Duration, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- f() }()
	select {
	case err := <-done:
		t.Logf("%s: returned after %v: %v", what, time.Since(start).Round(time.Millisecond), err)
		return err
	case <-time.After(limit):
		t.Fatalf("%s: still waiting after %v on a stalled endpoint", what, limit)
		return nil
	}
}

func stalledStore(t *testing.T, endpoint string, edit func(*Options)) *Store {
	t.Helper()
	opts := Options{
		Bucket: "b", Endpoint: endpoint, PathStyle: true, AccessKey: "a", SecretKey: "s",
		PartSize: MinPartSize, MaxAttempts: 2,
		AttemptTimeout: 300 * time.Millisecond, IdleTimeout: 300 * time.Millisecond,
		OperationTimeout: 5 * time.Second,
	}
	if edit != nil {
		edit(&opts)
	}
	s, err := New(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// assertTimedOut checks that err says it timed out, as a sentinel and in
// words.
func assertTimedOut(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("%s: got %v, want an error wrapping ErrTimeout", what, err)
	}
	if msg := err.Error(); !strings.Contains(msg, "timed out") && !strings.Contains(msg, "timeout") {
		t.Fatalf("%s: error does not say it timed out: %v", what, err)
	}
}

func TestSilentEndpointTimesOut(t *testing.T) {
	// A listener that accepts and never answers (finding 4: `tidemark ls`
	// waited 150 s for a bare EOF, or forever).
	srv := newStallServer(t, "silent")
	s := stalledStore(t, srv.endpoint(), nil)
	ctx := t.Context()
	ops := map[string]func() error{
		"stat": func() error { _, err := s.Stat(ctx, "k"); return err },
		"get":  func() error { _, err := s.Get(ctx, "k"); return err },
		"put":  func() error { return s.Put(ctx, "k", strings.NewReader("small")) },
		"put large": func() error {
			// Larger than the socket buffers: the body write stalls too.
			return s.Put(ctx, "k", bytes.NewReader(make([]byte, MinPartSize-1)))
		},
		"put-if-absent": func() error { _, err := s.PutIfAbsent(ctx, "k", strings.NewReader("x")); return err },
		"list": func() error {
			for _, err := range s.List(ctx, "") {
				return err
			}
			return nil
		},
		"delete": func() error { return s.Delete(ctx, "k") },
	}
	for name, op := range ops {
		t.Run(name, func(t *testing.T) {
			assertTimedOut(t, name, within(t, 30*time.Second, name, op))
		})
	}
	if srv.connections() == 0 {
		t.Fatal("no connection reached the stalling server")
	}
}

func TestOperationTimeoutBoundsEveryAttempt(t *testing.T) {
	// With no attempt limit the operation timeout alone ends a request to
	// a silent endpoint, and the error says so.
	srv := newStallServer(t, "silent")
	s := stalledStore(t, srv.endpoint(), func(o *Options) {
		o.MaxAttempts = -1
		o.OperationTimeout = 2 * time.Second
	})
	err := within(t, 30*time.Second, "stat", func() error { _, err := s.Stat(t.Context(), "k"); return err })
	assertTimedOut(t, "stat", err)
	if !strings.Contains(err.Error(), "operation timeout") {
		t.Fatalf("error does not name the operation timeout: %v", err)
	}
	if n := srv.connections(); n < 2 {
		t.Fatalf("%d connections: the request was not retried within the operation timeout", n)
	}
}

func TestStalledResponseBodyTimesOut(t *testing.T) {
	// Headers arrive, then the body stops: reading it must fail with
	// ErrTimeout, not hang.
	srv := newStallServer(t, "headers")
	s := stalledStore(t, srv.endpoint(), nil)
	err := within(t, 30*time.Second, "get and read", func() error {
		rc, err := s.Get(t.Context(), "k")
		if err != nil {
			return err
		}
		defer rc.Close()
		_, err = io.ReadAll(rc)
		return err
	})
	assertTimedOut(t, "read of a stalled body", err)
}

func TestSlowBodyIsNotCut(t *testing.T) {
	// A body that keeps moving, however slowly, outlives the idle timeout
	// many times over: the timeouts bound silence, not transfers.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	const chunks = 12
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", chunks)
		for range chunks {
			time.Sleep(100 * time.Millisecond) // a third of the idle timeout
			if _, err := c.Write([]byte("x")); err != nil {
				return
			}
		}
	}()
	s := stalledStore(t, "http://"+l.Addr().String(), func(o *Options) { o.OperationTimeout = 200 * time.Millisecond })
	rc, err := s.Get(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil || len(b) != chunks {
		t.Fatalf("read %d bytes, %v; want %d bytes over %v", len(b), err, chunks, chunks*100*time.Millisecond)
	}
}

func TestBlackholedMinIOTimesOutAndRecovers(t *testing.T) {
	// A network black hole between client and MinIO (finding 4: ridden
	// through silently, because nothing had a deadline).
	p := faultproxy.New(t, miniotest.Shared(t).Endpoint)
	s := newStore(t, miniotest.Shared(t), func(o *Options) {
		o.Endpoint = p.URL()
		o.MaxAttempts = 2
		o.AttemptTimeout = 500 * time.Millisecond
		o.IdleTimeout = 500 * time.Millisecond
	})
	ctx := t.Context()
	if err := s.Put(ctx, "k", strings.NewReader("v")); err != nil {
		t.Fatal(err)
	}
	p.Blackhole(true)
	err := within(t, 30*time.Second, "stat through a black hole", func() error { _, err := s.Stat(ctx, "k"); return err })
	assertTimedOut(t, "stat through a black hole", err)
	p.Blackhole(false)
	p.ResetAll() // what the black hole held is stale
	if _, err := s.Stat(ctx, "k"); err != nil {
		t.Fatalf("stat after the black hole lifted: %v", err)
	}
}
