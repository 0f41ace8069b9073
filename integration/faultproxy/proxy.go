package faultproxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	// chunkSize is the most one read takes from a socket; a chunk is the
	// unit that latency delays and the black hole holds.
	chunkSize = 64 << 10
	// queueLen is how many chunks may wait per direction of a connection
	// (their latency running) before the proxy stops reading that side:
	// at most queueLen × chunkSize bytes held per direction.
	queueLen = 16
	// dialTimeout bounds the connection to the target.
	dialTimeout = 5 * time.Second
)

// Stats are a proxy's counters since it started.
type Stats struct {
	// Accepted counts the connections accepted and forwarded to the target.
	Accepted int64
	// Refused counts the connections reset at once: by Refuse, or because
	// the target could not be reached.
	Refused int64
	// Active is the number of connections open now.
	Active int
	// BytesUp and BytesDown count the bytes forwarded to the target and
	// back to clients.
	BytesUp, BytesDown int64
	// Resets counts the connections reset by ResetAll.
	Resets int64
	// Cuts counts the connections closed by CutAfter.
	Cuts int64
	// LostResponses counts the connections closed by CutResponseAfter when
	// the server started answering.
	LostResponses int64
}

// Proxy forwards TCP connections from a loopback port to a loopback target
// and injects the faults its controls set. It is safe for concurrent use.
type Proxy struct {
	target string
	ln     net.Listener
	wg     sync.WaitGroup // the accept loop and every connection's goroutines

	mu        sync.Mutex
	closed    bool
	conns     map[*conn]struct{}
	latency   time.Duration
	refuse    bool
	blackhole bool
	changed   chan struct{} // closed and replaced when blackhole changes
	cutAt     int64         // BytesUp at which to cut; -1: none
	loseAt    int64         // BytesUp from which a response is lost; -1: none
	stats     Stats
}

// New starts a proxy to target (host:port, or a URL such as
// "http://127.0.0.1:9000" whose host is taken) on 127.0.0.1 with a free
// port, and closes it in t.Cleanup. It fails the test if target is not a
// loopback address or the port cannot be opened.
func New(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := Start(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// Start is New without a test: the caller closes the proxy.
func Start(target string) (*Proxy, error) {
	hostport, err := loopbackTarget(target)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	p := &Proxy{
		target:  hostport,
		ln:      ln,
		conns:   map[*conn]struct{}{},
		changed: make(chan struct{}),
		cutAt:   -1,
		loseAt:  -1,
	}
	p.wg.Go(p.acceptLoop)
	return p, nil
}

// loopbackTarget returns target as host:port, or an error unless its host
// is localhost or a loopback IP.
func loopbackTarget(target string) (string, error) {
	hostport := target
	if strings.Contains(target, "://") {
		u, err := url.Parse(target)
		if err != nil {
			return "", fmt.Errorf("faultproxy: target %q: %w", target, err)
		}
		hostport = u.Host
	}
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return "", fmt.Errorf("faultproxy: target %q: %w", target, err)
	}
	if host == "localhost" {
		return hostport, nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return "", fmt.Errorf("faultproxy: target %q: only loopback addresses are proxied", target)
	}
	return hostport, nil
}

// Addr returns the proxy's address, "127.0.0.1:<port>".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// URL returns "http://" + Addr(), the endpoint to give an HTTP client.
func (p *Proxy) URL() string { return "http://" + p.Addr() }

// SetLatency delays every chunk read from either side by d before it is
// forwarded (0: none). It applies to chunks read from now on.
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.latency = d
}

// CutAfter lets n more bytes through towards the target (counted over all
// connections) and then closes the connection that carried the n-th byte
// on both sides, without forwarding the rest of what it was sending. With
// n = 0 the next connection to send anything is cut before any of it goes
// through. It fires once; a second call replaces the first.
func (p *Proxy) CutAfter(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cutAt = p.stats.BytesUp + max(n, 0)
}

// CutResponseAfter marks the connection that carries the n-th byte towards
// the target from now (n ≥ 1; counted over all connections): everything
// it sends still goes through, but as soon as the target answers on it
// the answer is dropped and the connection is reset on both sides. Called
// while the client is idle with n = 1, it loses the response to the next
// request after the server has handled it. It fires once; a second call
// replaces the first.
func (p *Proxy) CutResponseAfter(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.loseAt = p.stats.BytesUp + max(n, 1)
}

// ResetAll resets every open connection, on both sides (SO_LINGER 0, so
// each peer gets an RST rather than an orderly close), and returns how
// many it reset. New connections are accepted as before.
func (p *Proxy) ResetAll() int {
	p.mu.Lock()
	open := make([]*conn, 0, len(p.conns))
	for c := range p.conns {
		open = append(open, c)
	}
	p.mu.Unlock()
	n := 0
	for _, c := range open {
		if c.close(true) {
			n++
		}
	}
	p.mu.Lock()
	p.stats.Resets += int64(n)
	p.mu.Unlock()
	return n
}

// Refuse makes the proxy reset every new connection as soon as it is
// accepted (on), or forward them again (off). Open connections are not
// affected.
func (p *Proxy) Refuse(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuse = on
}

// Blackhole stops forwarding in both directions, on open and new
// connections (on): bytes are read and held, up to a bound per connection,
// and nothing reaches the other side, so requests hang until their client
// gives up. Off forwards what was held and resumes.
func (p *Proxy) Blackhole(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.blackhole != on {
		p.blackhole = on
		close(p.changed)
		p.changed = make(chan struct{})
	}
}

// Stats returns the counters.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.Active = len(p.conns)
	return s
}

// Close stops accepting, closes every connection and waits for the
// proxy's goroutines to end. It is idempotent.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	open := make([]*conn, 0, len(p.conns))
	for c := range p.conns {
		open = append(open, c)
	}
	p.mu.Unlock()
	err := p.ln.Close()
	for _, c := range open {
		c.close(false)
	}
	p.wg.Wait()
	return err
}

func (p *Proxy) acceptLoop() {
	for {
		nc, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Temporary (EMFILE and the like): back off and go on.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		p.wg.Go(func() { p.serve(nc.(*net.TCPConn)) })
	}
}

// reset closes a TCP connection with an RST.
func reset(c *net.TCPConn) {
	_ = c.SetLinger(0)
	_ = c.Close()
}

// serve connects client to the target and forwards between them.
func (p *Proxy) serve(client *net.TCPConn) {
	p.mu.Lock()
	refuse := p.refuse || p.closed
	if refuse {
		p.stats.Refused++
	}
	p.mu.Unlock()
	if refuse {
		reset(client)
		return
	}
	nc, err := net.DialTimeout("tcp", p.target, dialTimeout)
	if err != nil {
		p.mu.Lock()
		p.stats.Refused++
		p.mu.Unlock()
		reset(client)
		return
	}
	c := &conn{p: p, client: client, server: nc.(*net.TCPConn), done: make(chan struct{})}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		reset(c.client)
		reset(c.server)
		return
	}
	p.conns[c] = struct{}{}
	p.stats.Accepted++
	p.mu.Unlock()
	// Four goroutines: a reader and a writer per direction, so that a
	// delayed or held chunk does not stop the next one from being read
	// (latency is not a bandwidth limit).
	up, down := make(chan chunk, queueLen), make(chan chunk, queueLen)
	p.wg.Go(func() { c.read(c.client, up, true) })
	p.wg.Go(func() { c.write(c.server, up, true) })
	p.wg.Go(func() { c.read(c.server, down, false) })
	p.wg.Go(func() { c.write(c.client, down, false) })
}

// conn is one proxied connection.
type conn struct {
	p              *Proxy
	client, server *net.TCPConn
	done           chan struct{} // closed when the connection is closed
	once           sync.Once
	mu             sync.Mutex
	loseResponse   bool // set by CutResponseAfter
}

// chunk is bytes read from one side, due on the other side at due.
type chunk struct {
	b   []byte
	due time.Time
}

// close closes both sides (with an RST if rst) and reports whether this
// call closed them.
func (c *conn) close(rst bool) bool {
	closed := false
	c.once.Do(func() {
		closed = true
		if rst {
			reset(c.client)
			reset(c.server)
		} else {
			_ = c.client.Close()
			_ = c.server.Close()
		}
		close(c.done)
		c.p.mu.Lock()
		delete(c.p.conns, c)
		c.p.mu.Unlock()
	})
	return closed
}

// read reads src into chunks for the writer of the other side. When the
// client leaves, the connection is closed at once: nobody is left to read
// an answer. When the server ends its side, what it sent is still
// delivered (a response followed by "Connection: close"), then the
// connection is closed.
func (c *conn) read(src *net.TCPConn, out chan<- chunk, fromClient bool) {
	for {
		b := make([]byte, chunkSize)
		n, err := src.Read(b)
		if n > 0 {
			c.p.mu.Lock()
			due := time.Now().Add(c.p.latency)
			c.p.mu.Unlock()
			select {
			case out <- chunk{b: b[:n], due: due}:
			case <-c.done:
				return
			}
		}
		if err != nil {
			if err == io.EOF && !fromClient {
				close(out) // the writer delivers what is queued, then closes
				return
			}
			c.close(false)
			return
		}
	}
}

// write forwards chunks to dst when they are due, while no black hole
// holds them, applying the cuts.
func (c *conn) write(dst *net.TCPConn, in <-chan chunk, toServer bool) {
	for {
		var ck chunk
		var ok bool
		select {
		case ck, ok = <-in:
		case <-c.done:
			return
		}
		if !ok {
			c.close(false)
			return
		}
		if !c.wait(ck.due) || !c.p.waitOpen(c.done) {
			return
		}
		b := ck.b
		var cut bool
		if toServer {
			b, cut = c.accountUp(b)
		} else {
			c.mu.Lock()
			lose := c.loseResponse
			c.mu.Unlock()
			if lose {
				c.p.mu.Lock()
				c.p.stats.LostResponses++
				c.p.mu.Unlock()
				c.close(true)
				return
			}
			c.p.mu.Lock()
			c.p.stats.BytesDown += int64(len(b))
			c.p.mu.Unlock()
		}
		if len(b) > 0 {
			if _, err := dst.Write(b); err != nil {
				c.close(false)
				return
			}
		}
		if cut {
			c.close(false)
			return
		}
	}
}

// accountUp counts b towards the target and applies CutAfter and
// CutResponseAfter: it returns the part of b to forward and whether to
// cut the connection after it.
func (c *conn) accountUp(b []byte) ([]byte, bool) {
	p := c.p
	p.mu.Lock()
	defer p.mu.Unlock()
	start, end := p.stats.BytesUp, p.stats.BytesUp+int64(len(b))
	cut := false
	if p.cutAt >= 0 && end >= p.cutAt {
		b = b[:p.cutAt-start]
		end = p.cutAt
		p.cutAt = -1
		p.stats.Cuts++
		cut = true
	}
	if p.loseAt >= 0 && end >= p.loseAt && !cut {
		p.loseAt = -1
		c.mu.Lock()
		c.loseResponse = true
		c.mu.Unlock()
	}
	p.stats.BytesUp = end
	return b, cut
}

// wait sleeps until due; false if the connection closed meanwhile.
func (c *conn) wait(due time.Time) bool {
	d := time.Until(due)
	if d <= 0 {
		return true
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-c.done:
		return false
	}
}

// waitOpen waits while the black hole is on; false if done closed
// meanwhile.
func (p *Proxy) waitOpen(done <-chan struct{}) bool {
	for {
		p.mu.Lock()
		on, changed := p.blackhole, p.changed
		p.mu.Unlock()
		if !on {
			return true
		}
		select {
		case <-changed:
		case <-done:
			return false
		}
	}
}
