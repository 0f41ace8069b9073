package s3store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"
)

// Deadlines. Every request has three, so that no endpoint can stall a
// caller without bound, and none cuts a transfer that is making progress:
//
//   - the attempt timeout bounds connecting and, once a request is sent
//     (its body included), the wait for the response headers: a HEAD, a
//     small PUT or the first byte of a GET fails within it;
//   - the idle timeout bounds a body in either direction that moves no
//     byte: an upload the server stops reading, a download the server
//     stops sending. A slow transfer that keeps moving is never cut;
//   - the operation timeout bounds one request with all its attempts and
//     the backoff between them, until its response headers arrive. A
//     request with a body gets one second more per MiB of it (a floor of
//     1 MiB/s), so a large part upload is not cut while it progresses.
//
// A request that times out is retried like any other failure; when the
// attempts or the operation timeout run out the error wraps ErrTimeout.
const (
	// DefaultAttemptTimeout is Options.AttemptTimeout when zero.
	DefaultAttemptTimeout = 10 * time.Second
	// DefaultIdleTimeout is Options.IdleTimeout when zero.
	DefaultIdleTimeout = 30 * time.Second
	// DefaultOperationTimeout is Options.OperationTimeout when zero: a
	// silent endpoint fails a request after a minute (six attempts of
	// DefaultAttemptTimeout with their backoff), a refused one after the
	// attempts run out (about 8 s).
	DefaultOperationTimeout = time.Minute
	// DefaultMaxBackoff is Options.MaxBackoff when zero: the longest wait
	// between two attempts (the backoff doubles from 50 ms, or from 1 s
	// after throttling, with full jitter).
	DefaultMaxBackoff = 5 * time.Second

	// bodyAllowance is the time the operation timeout grows by per byte
	// of request body: one second per MiB.
	bodyAllowance = time.Second / (1 << 20)
)

// ErrTimeout is wrapped by the error of a request that ran out of time:
// its attempt, idle or operation timeout (see Options). The caller's own
// context deadline is reported as context.DeadlineExceeded instead.
var ErrTimeout = errors.New("s3store: timed out")

// timeouts are the resolved deadlines of a Store; zero means none.
type timeouts struct {
	attempt, idle, operation time.Duration
}

// resolveDuration applies the convention of the Options durations: zero
// is the default, negative is none.
func resolveDuration(v, def time.Duration) time.Duration {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}

// withTimeouts returns a copy of c (the SDK's default client if nil)
// with the attempt and idle timeouts installed.
func withTimeouts(c *awshttp.BuildableClient, t timeouts) *awshttp.BuildableClient {
	if c == nil {
		c = awshttp.NewBuildableClient()
	}
	if t.attempt > 0 {
		c = c.WithDialerOptions(func(d *net.Dialer) { d.Timeout = t.attempt }).
			WithTransportOptions(func(tr *http.Transport) {
				tr.ResponseHeaderTimeout = t.attempt
				tr.TLSHandshakeTimeout = t.attempt
			})
	}
	if t.idle > 0 {
		c = c.WithTransportOptions(func(tr *http.Transport) {
			dial := tr.DialContext
			tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
				conn, err := dial(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return &idleConn{Conn: conn, idle: t.idle}, nil
			}
		})
	}
	return c
}

// idleConn fails a read or write that moves no byte for idle. The
// deadline is set when a call starts, so a connection that nobody reads
// from (a body the caller consumes slowly) is not timed out, and an idle
// connection in the pool is merely closed.
type idleConn struct {
	net.Conn
	idle time.Duration
}

func (c *idleConn) Read(p []byte) (int, error) {
	if err := c.Conn.SetReadDeadline(time.Now().Add(c.idle)); err != nil {
		return 0, err
	}
	n, err := c.Conn.Read(p)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		err = &idleTimeoutError{what: "received", d: c.idle}
	}
	return n, err
}

func (c *idleConn) Write(p []byte) (int, error) {
	if err := c.Conn.SetWriteDeadline(time.Now().Add(c.idle)); err != nil {
		return 0, err
	}
	n, err := c.Conn.Write(p)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		err = &idleTimeoutError{what: "sent", d: c.idle}
	}
	return n, err
}

// idleTimeoutError is a net.Error that times out, so the SDK retries it
// and wrap reports it as ErrTimeout.
type idleTimeoutError struct {
	what string
	d    time.Duration
}

func (e *idleTimeoutError) Error() string {
	return fmt.Sprintf("no byte %s for %v (idle timeout)", e.what, e.d)
}
func (e *idleTimeoutError) Timeout() bool   { return true }
func (e *idleTimeoutError) Temporary() bool { return true }
func (e *idleTimeoutError) Unwrap() error   { return os.ErrDeadlineExceeded }

// Is makes the error ErrTimeout also where it reaches the caller without
// passing through the store: a response body read by the caller.
func (e *idleTimeoutError) Is(target error) bool { return target == ErrTimeout }

// operationTimeout is the middleware that bounds one operation (all its
// attempts and backoff) by the operation timeout, and remembers the
// error of its last attempt, so that a request that ran out of time says
// what the endpoint did meanwhile. For GetObject the deadline ends when
// the response headers arrive: the body then streams under the idle
// timeout alone, for as long as the caller reads.
type operationTimeout struct{ d time.Duration }

func (operationTimeout) ID() string { return "TidemarkOperationTimeout" }

// lastAttempt holds the error of the latest attempt of an operation.
type lastAttempt struct {
	mu  sync.Mutex
	err error
	n   int
}

type lastAttemptKey struct{}

func (m operationTimeout) HandleInitialize(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
	d := m.d
	switch p := in.Parameters.(type) {
	case *s3.PutObjectInput:
		d += time.Duration(max(0, derefInt64(p.ContentLength))) * bodyAllowance
	case *s3.UploadPartInput:
		d += time.Duration(max(0, derefInt64(p.ContentLength))) * bodyAllowance
	}
	la := &lastAttempt{}
	ctx = context.WithValue(ctx, lastAttemptKey{}, la)
	octx, cancel := context.WithCancelCause(ctx)
	timedOut := errors.New("operation timeout")
	timer := time.AfterFunc(d, func() { cancel(timedOut) })
	out, md, err := next.HandleInitialize(octx, in)
	stopped := timer.Stop()
	if err != nil {
		cancel(nil)
		if !stopped && context.Cause(octx) == timedOut && ctx.Err() == nil {
			la.mu.Lock()
			last, n := la.err, la.n
			la.mu.Unlock()
			if last == nil {
				last = err
			}
			return out, md, fmt.Errorf("%w: no answer within %v (operation timeout, %d attempts); last attempt: %w", ErrTimeout, d, n, last)
		}
		return out, md, err
	}
	if g, ok := out.Result.(*s3.GetObjectOutput); ok && g.Body != nil {
		// The body reads through octx: release it only when the body is
		// closed.
		g.Body = &cancelOnClose{ReadCloser: g.Body, cancel: func() { cancel(nil) }}
	} else {
		cancel(nil)
	}
	return out, md, err
}

// recordAttempt is the per-attempt middleware (after Retry) that stores
// each attempt's error for operationTimeout.
type recordAttempt struct{}

func (recordAttempt) ID() string { return "TidemarkRecordAttempt" }

func (recordAttempt) HandleFinalize(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
	out, md, err := next.HandleFinalize(ctx, in)
	if la, ok := ctx.Value(lastAttemptKey{}).(*lastAttempt); ok {
		la.mu.Lock()
		la.n++
		if err != nil && !errors.Is(err, context.Canceled) {
			la.err = err
		}
		la.mu.Unlock()
	}
	return out, md, err
}

// addTimeoutMiddleware installs operationTimeout (if d > 0) and
// recordAttempt on a client's stack.
func addTimeoutMiddleware(d time.Duration) func(*middleware.Stack) error {
	return func(st *middleware.Stack) error {
		if d <= 0 {
			return nil
		}
		if err := st.Initialize.Add(operationTimeout{d: d}, middleware.Before); err != nil {
			return err
		}
		return st.Finalize.Insert(recordAttempt{}, "Retry", middleware.After)
	}
}

type cancelOnClose struct {
	io.ReadCloser
	once   sync.Once
	cancel func()
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.once.Do(c.cancel)
	return err
}

func derefInt64(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}
