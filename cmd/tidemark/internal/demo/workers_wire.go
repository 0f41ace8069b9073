package demo

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// The transport between the coordinator and its workers: one TCP
// connection per worker, opened by the worker, carrying JSON messages one
// per line. The coordinator sends a request and waits for its reply; a
// worker handles one request at a time. The connection carries no state
// of the job: everything a worker restores comes from the store.

// wireVersion is the protocol version a worker states in its hello; the
// coordinator refuses another one. Version 2 added opStandby.
const wireVersion = 2

// Operations of a wireRequest.
const (
	opOpen    = "open"    // (re)open the owners from a checkpoint, or empty
	opBatch   = "batch"   // fold records into the owners' state
	opBarrier = "barrier" // checkpoint the owners and save their parts
	opStop    = "stop"    // the job is done: exit
	opRefuse  = "refuse"  // the answer to a hello the coordinator refuses: Reason says why
	// opStandby tells a worker that connected for a slot that has a live
	// worker that it waits as that slot's standby (Reason says so, for
	// the worker to print). It takes no reply.
	opStandby = "standby"
)

// wireHello is the first message of a worker.
type wireHello struct {
	Version int `json:"version"`
	// Slot is the worker's place in the job (0 … Workers-1).
	Slot int `json:"slot"`
	// Worker is the id of this incarnation (blobstorage.NewWorkerID).
	Worker string `json:"worker"`
	// Token is the job's worker token (WorkerConfig.Token), if any.
	Token string `json:"token,omitempty"`
}

// wireRequest is a request of the coordinator.
type wireRequest struct {
	Op string `json:"op"`

	// refuse
	Reason string `json:"reason,omitempty"`

	// open
	Store        string   `json:"store,omitempty"`       // the store's URL, as workers open it
	Concurrency  int      `json:"concurrency,omitempty"` // parallel uploads and downloads
	MemTableSize uint64   `json:"memtable,omitempty"`
	CacheSize    int64    `json:"cache,omitempty"`
	Checkpoint   string   `json:"checkpoint,omitempty"` // "" : start empty
	Owners       []string `json:"owners,omitempty"`

	// batch: per owner, word → records of that word in the batch.
	Records map[string]map[string]uint64 `json:"records,omitempty"`

	// barrier
	ID    string `json:"id,omitempty"`
	Epoch uint64 `json:"epoch,omitempty"`
	// Keep is the latest completed checkpoint: the worker keeps its local
	// state directories of Keep and ID and removes the others.
	Keep string `json:"keep,omitempty"`
}

// wireReply is a worker's reply. Err is set when the request failed.
type wireReply struct {
	Err string `json:"err,omitempty"`

	// hello (the coordinator's reply to it): Err says why it was refused.

	// open: records folded into each owner; which owners came from the
	// worker's own disk and which it downloaded.
	Totals     map[string]uint64 `json:"totals,omitempty"`
	Local      []string          `json:"local,omitempty"`
	Downloaded []string          `json:"downloaded,omitempty"`

	// batch: the count each word gained (the output for the sink).
	Deltas map[string]uint64 `json:"deltas,omitempty"`

	// barrier: owner → state directory relative to StateDir(ID), and what
	// SavePart uploaded.
	Dirs          map[string]string `json:"dirs,omitempty"`
	UploadedFiles int               `json:"uploaded_files,omitempty"`
	UploadedBytes int64             `json:"uploaded_bytes,omitempty"`
}

// wireConn is one end of a connection: JSON messages, one per line.
type wireConn struct {
	conn net.Conn
	r    *bufio.Reader
	w    *bufio.Writer
}

func newWireConn(c net.Conn) *wireConn {
	return &wireConn{conn: c, r: bufio.NewReaderSize(c, 64<<10), w: bufio.NewWriterSize(c, 64<<10)}
}

// maxWireMessage bounds one message (a batch of the largest vocabulary is
// far below it).
const maxWireMessage = 64 << 20

func (c *wireConn) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := c.w.Write(append(b, '\n')); err != nil {
		return err
	}
	return c.w.Flush()
}

func (c *wireConn) recv(v any) error {
	var line []byte
	for {
		chunk, isPrefix, err := c.r.ReadLine()
		if err != nil {
			return err
		}
		line = append(line, chunk...)
		if len(line) > maxWireMessage {
			return fmt.Errorf("message longer than %d bytes", maxWireMessage)
		}
		if !isPrefix {
			break
		}
	}
	if err := json.Unmarshal(line, v); err != nil {
		return fmt.Errorf("malformed message: %w", err)
	}
	return nil
}

func (c *wireConn) close() error { return c.conn.Close() }

// ErrWorkerLost is wrapped by the errors of a worker that died, hung or
// broke the protocol: its connection failed or timed out.
var ErrWorkerLost = errors.New("demo: worker lost")

// workerLostError says which worker was lost, and how.
type workerLostError struct {
	slot   int
	worker string
	err    error
}

func (e *workerLostError) Error() string {
	return fmt.Sprintf("worker %s (slot %d): %v", e.worker, e.slot, e.err)
}

func (e *workerLostError) Unwrap() []error { return []error{ErrWorkerLost, e.err} }

// workerFailedError is a request that a live worker answered with an
// error: not a lost worker, but a failure of the job (a bad checkpoint, a
// full disk, a fenced part).
type workerFailedError struct {
	slot   int
	worker string
	op     string
	msg    string
}

func (e *workerFailedError) Error() string {
	return fmt.Sprintf("worker %s (slot %d): %s: %s", e.worker, e.slot, e.op, e.msg)
}

// remoteWorker is the coordinator's handle of one connected worker.
type remoteWorker struct {
	slot int
	id   string
	mu   sync.Mutex // one request at a time
	c    *wireConn
}

// call sends req and waits for the reply, at most timeout (and never past
// ctx). A transport failure or a timeout is a lost worker; a reply with
// Err a failed request.
func (w *remoteWorker) call(ctx context.Context, timeout time.Duration, req *wireRequest) (*wireReply, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = w.c.conn.SetDeadline(deadline)
	// A cancelled ctx interrupts the call at once.
	stop := context.AfterFunc(ctx, func() { _ = w.c.conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	lost := func(err error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			err = fmt.Errorf("%s: no reply within %v: %w", req.Op, timeout, err)
		} else {
			err = fmt.Errorf("%s: %w", req.Op, err)
		}
		return &workerLostError{slot: w.slot, worker: w.id, err: err}
	}
	if err := w.c.send(req); err != nil {
		return nil, lost(err)
	}
	var rep wireReply
	if err := w.c.recv(&rep); err != nil {
		return nil, lost(err)
	}
	if rep.Err != "" {
		return &rep, &workerFailedError{slot: w.slot, worker: w.id, op: req.Op, msg: rep.Err}
	}
	return &rep, nil
}

func (w *remoteWorker) close() { _ = w.c.close() }

// arrival is a worker that connected and said hello.
type arrival struct {
	hello wireHello
	c     *wireConn
}

// acceptWorkers accepts connections on l until it is closed and sends
// every worker that says a valid hello within helloTimeout, and that
// admit passes on, to out. admit answers the others at once, as soon as
// they say hello, not when the coordinator next waits for workers: it
// refuses them or keeps them as standbys.
func acceptWorkers(l net.Listener, out chan<- arrival, done <-chan struct{}, helloTimeout time.Duration, admit func(arrival) bool) {
	for {
		conn, err := l.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return // closed
		}
		go func() {
			c := newWireConn(conn)
			_ = conn.SetDeadline(time.Now().Add(helloTimeout))
			var h wireHello
			if err := c.recv(&h); err != nil {
				_ = c.close()
				return
			}
			if h.Version != wireVersion {
				_ = c.send(wireRequest{Op: opRefuse, Reason: fmt.Sprintf("protocol version %d, the coordinator speaks %d", h.Version, wireVersion)})
				_ = c.close()
				return
			}
			_ = conn.SetDeadline(time.Time{})
			a := arrival{hello: h, c: c}
			if !admit(a) {
				return // refused (told why, closed and reported) or kept as a standby
			}
			select {
			case out <- a:
			case <-done:
				_ = c.close()
			}
		}()
	}
}

// sendNow sends req on c within a few seconds: a worker that does not
// read it then is not worth waiting for.
func (c *wireConn) sendNow(req wireRequest) error {
	_ = c.conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	defer func() { _ = c.conn.SetWriteDeadline(time.Time{}) }()
	return c.send(req)
}
