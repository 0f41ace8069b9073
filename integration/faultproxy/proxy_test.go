package faultproxy

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// echoServer is a loopback TCP server that echoes every byte back and
// records what each connection sent.
type echoServer struct {
	ln       net.Listener
	received chan []byte // one entry per connection, when it ends
	wg       sync.WaitGroup
}

func newEchoServer(t *testing.T) *echoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &echoServer{ln: ln, received: make(chan []byte, 100)}
	s.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Go(func() {
				defer c.Close()
				var got bytes.Buffer
				_, _ = io.Copy(io.MultiWriter(c, &got), c)
				s.received <- got.Bytes()
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		s.wg.Wait()
	})
	return s
}

// nextReceived returns what the next connection to end sent the server.
func (s *echoServer) nextReceived(t *testing.T) []byte {
	t.Helper()
	select {
	case b := <-s.received:
		return b
	case <-time.After(5 * time.Second):
		t.Fatal("the server's connection did not end within 5s")
		return nil
	}
}

func dial(t *testing.T, p *Proxy) *net.TCPConn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn)
}

// roundTrip writes msg and reads len(msg) bytes back within timeout.
func roundTrip(c net.Conn, msg string, timeout time.Duration) (string, error) {
	if _, err := c.Write([]byte(msg)); err != nil {
		return "", err
	}
	_ = c.SetReadDeadline(time.Now().Add(timeout))
	defer c.SetReadDeadline(time.Time{})
	b := make([]byte, len(msg))
	n, err := io.ReadFull(c, b)
	return string(b[:n]), err
}

// readFails reads from c and returns the error it ends with, failing the
// test if bytes arrive or nothing happens within 5s.
func readFails(t *testing.T, c net.Conn) error {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b := make([]byte, 1)
	n, err := c.Read(b)
	if n > 0 {
		t.Fatalf("read %q, want the connection closed", b[:n])
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the connection is still open after 5s")
	}
	return err
}

func TestForwardsBothWaysAndCountsBytes(t *testing.T) {
	srv := newEchoServer(t)
	p := New(t, srv.ln.Addr().String())
	c := dial(t, p)
	for _, msg := range []string{"hello", strings.Repeat("x", 300<<10)} {
		got, err := roundTrip(c, msg, 5*time.Second)
		if err != nil || got != msg {
			t.Fatalf("round trip of %d bytes: got %d bytes, %v", len(msg), len(got), err)
		}
	}
	c.Close()
	if got := srv.nextReceived(t); len(got) != 5+300<<10 {
		t.Errorf("server received %d bytes, want %d", len(got), 5+300<<10)
	}
	st := p.Stats()
	if st.Accepted != 1 || st.BytesUp != 5+300<<10 || st.BytesDown != 5+300<<10 {
		t.Errorf("stats %+v, want 1 connection and %d bytes each way", st, 5+300<<10)
	}
}

func TestAcceptsURLTargets(t *testing.T) {
	srv := newEchoServer(t)
	p := New(t, "http://"+srv.ln.Addr().String())
	if got, err := roundTrip(dial(t, p), "hi", 5*time.Second); err != nil || got != "hi" {
		t.Fatalf("round trip through a proxy to a URL: %q, %v", got, err)
	}
}

func TestRefusesNonLoopbackTargets(t *testing.T) {
	for _, target := range []string{"192.0.2.1:80", "http://example.com:9000", "10.0.0.1:9000", "no-port"} {
		if p, err := Start(target); err == nil {
			p.Close()
			t.Errorf("Start(%q) succeeded, want an error", target)
		}
	}
}

func TestLatencyDelaysEachDirection(t *testing.T) {
	srv := newEchoServer(t)
	p := New(t, srv.ln.Addr().String())
	const d = 100 * time.Millisecond
	p.SetLatency(d)
	c := dial(t, p)
	start := time.Now()
	if got, err := roundTrip(c, "ping", 5*time.Second); err != nil || got != "ping" {
		t.Fatalf("round trip: %q, %v", got, err)
	}
	if rtt := time.Since(start); rtt < 2*d {
		t.Errorf("round trip took %v, want at least %v (latency each way)", rtt, 2*d)
	}
	// A stream of many chunks costs the latency once, not once per chunk.
	big := strings.Repeat("y", 4<<20)
	start = time.Now()
	if got, err := roundTrip(c, big, 10*time.Second); err != nil || got != big {
		t.Fatalf("round trip of 4 MiB: %d bytes, %v", len(got), err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("4 MiB (64 chunks) took %v with %v latency: latency acts as a bandwidth limit", el, d)
	}
}

func TestCutAfterClosesBothSidesAfterNBytes(t *testing.T) {
	srv := newEchoServer(t)
	p := New(t, srv.ln.Addr().String())
	c := dial(t, p)
	if got, err := roundTrip(c, "before", 5*time.Second); err != nil || got != "before" {
		t.Fatalf("round trip: %q, %v", got, err)
	}
	p.CutAfter(40)
	msg := strings.Repeat("z", 100)
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
	// The echo of the first 40 bytes may or may not arrive before the cut.
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	rest, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the client's side is still open after 5s")
	}
	if len(rest) > 40 {
		t.Errorf("client read %d bytes back, more than the 40 let through", len(rest))
	}
	if got := srv.nextReceived(t); string(got) != "before"+msg[:40] {
		t.Errorf("server received %q, want %q", got, "before"+msg[:40])
	}
	if st := p.Stats(); st.Cuts != 1 {
		t.Errorf("Cuts = %d, want 1", st.Cuts)
	}
	// It fires once: a new connection goes through whole.
	if got, err := roundTrip(dial(t, p), msg, 5*time.Second); err != nil || got != msg {
		t.Fatalf("round trip after the cut: %d bytes, %v", len(got), err)
	}
}

func TestCutResponseAfterDeliversTheRequestAndLosesTheAnswer(t *testing.T) {
	srv := newEchoServer(t)
	p := New(t, srv.ln.Addr().String())
	c := dial(t, p)
	if got, err := roundTrip(c, "warm", 5*time.Second); err != nil || got != "warm" {
		t.Fatalf("round trip: %q, %v", got, err)
	}
	p.CutResponseAfter(1)
	if _, err := c.Write([]byte("request")); err != nil {
		t.Fatal(err)
	}
	readFails(t, c)
	if got := srv.nextReceived(t); string(got) != "warmrequest" {
		t.Errorf("server received %q, want the whole request %q", got, "warmrequest")
	}
	if st := p.Stats(); st.LostResponses != 1 {
		t.Errorf("LostResponses = %d, want 1", st.LostResponses)
	}
}

func TestResetAllSendsRSTToOpenConnections(t *testing.T) {
	srv := newEchoServer(t)
	p := New(t, srv.ln.Addr().String())
	c1, c2 := dial(t, p), dial(t, p)
	for _, c := range []net.Conn{c1, c2} {
		if _, err := roundTrip(c, "x", 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if n := p.ResetAll(); n != 2 {
		t.Errorf("ResetAll reset %d connections, want 2", n)
	}
	for _, c := range []net.Conn{c1, c2} {
		if err := readFails(t, c); !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("read after ResetAll: %v, want ECONNRESET", err)
		}
	}
	if st := p.Stats(); st.Resets != 2 || st.Active != 0 {
		t.Errorf("stats %+v, want 2 resets and no active connection", st)
	}
	if got, err := roundTrip(dial(t, p), "again", 5*time.Second); err != nil || got != "again" {
		t.Fatalf("a new connection after ResetAll: %q, %v", got, err)
	}
}

func TestRefuseResetsNewConnectionsOnly(t *testing.T) {
	srv := newEchoServer(t)
	p := New(t, srv.ln.Addr().String())
	open := dial(t, p)
	if _, err := roundTrip(open, "x", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Refuse(true)
	// The RST may arrive before connect returns, or at the first read.
	if c, err := net.Dial("tcp", p.Addr()); err == nil {
		if err := readFails(t, c); err == nil {
			t.Error("a new connection while refusing read without error")
		}
		c.Close()
	}
	if got, err := roundTrip(open, "still", 5*time.Second); err != nil || got != "still" {
		t.Errorf("an open connection while refusing: %q, %v", got, err)
	}
	p.Refuse(false)
	if got, err := roundTrip(dial(t, p), "back", 5*time.Second); err != nil || got != "back" {
		t.Errorf("a new connection after Refuse(false): %q, %v", got, err)
	}
	if st := p.Stats(); st.Refused != 1 {
		t.Errorf("Refused = %d, want 1", st.Refused)
	}
}

func TestBlackholeHoldsTrafficUntilLifted(t *testing.T) {
	srv := newEchoServer(t)
	p := New(t, srv.ln.Addr().String())
	open := dial(t, p)
	if _, err := roundTrip(open, "x", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Blackhole(true)
	fresh := dial(t, p)
	for _, c := range []net.Conn{open, fresh} {
		_, err := roundTrip(c, "held", 300*time.Millisecond)
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("round trip through the black hole: %v, want a timeout", err)
		}
	}
	p.Blackhole(false)
	for _, c := range []net.Conn{open, fresh} {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		b := make([]byte, 4)
		if _, err := io.ReadFull(c, b); err != nil || string(b) != "held" {
			t.Errorf("after the black hole is lifted: %q, %v; want the held bytes", b, err)
		}
	}
}

func TestCloseEndsEveryConnection(t *testing.T) {
	srv := newEchoServer(t)
	p, err := Start(srv.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, p)
	if _, err := roundTrip(c, "x", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Blackhole(true) // a held writer must not keep Close waiting
	if _, err := c.Write([]byte("stuck")); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() { p.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return within 5s")
	}
	readFails(t, c)
	if _, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		t.Error("the proxy still accepts connections after Close")
	}
}
