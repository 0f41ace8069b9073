package blobstore

import (
	"context"
	"errors"
	"io"
	"iter"
	"sync"
	"time"
)

// Op names a Blobstore operation, as observers, metrics and logs label it
// (snake_case, as thanos objstore names its operations).
type Op string

// The operations of a Blobstore.
const (
	OpPut         Op = "put"
	OpPutIfAbsent Op = "put_if_absent"
	OpPutIfMatch  Op = "put_if_match"
	OpGet         Op = "get"
	OpGetRange    Op = "get_range"
	OpStat        Op = "stat"
	OpExists      Op = "exists"
	OpList        Op = "list"
	OpDelete      Op = "delete"
)

// Ops lists every Op, in a fixed order (for registering metrics up front).
var Ops = []Op{OpPut, OpPutIfAbsent, OpPutIfMatch, OpGet, OpGetRange, OpStat, OpExists, OpList, OpDelete}

// Observer receives what an observed store (Observe) does. Its methods
// are called concurrently, from the goroutines doing the operations, and
// must be quick.
type Observer interface {
	// Transferred is called as the bytes of an operation move: for the
	// puts, as the store reads the body; for Get and GetRange, as the
	// caller reads the object. Progress bars use it.
	Transferred(op Op, key string, n int)
	// Done is called once when an operation ends: for Get and GetRange
	// when the caller closes the body (or opening it fails), for List when
	// the iteration ends (key is then the prefix). bytes is the total
	// transferred, err the operation's error (reaching the end of a body
	// is not one).
	Done(op Op, key string, bytes int64, d time.Duration, err error)
}

// Observe returns bs with every operation reported to o. Keys are
// reported as bs sees them. It forwards every capability (see As), and
// adds nothing to the work of an operation but counting.
func Observe(bs Blobstore, o Observer) Blobstore { return &observed{bs: bs, o: o} }

type observed struct {
	bs Blobstore
	o  Observer
}

var (
	_ Blobstore = (*observed)(nil)
	_ Unwrapper = (*observed)(nil)
)

// Unwrap returns the observed store.
func (s *observed) Unwrap() Blobstore { return s.bs }

// body counts the bytes read through r into op's observation.
type body struct {
	r   io.Reader
	op  Op
	key string
	o   Observer
	n   int64
	err error // first read error other than io.EOF
}

func (b *body) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if n > 0 {
		b.n += int64(n)
		b.o.Transferred(b.op, b.key, n)
	}
	if err != nil && err != io.EOF && b.err == nil {
		b.err = err
	}
	return n, err
}

func (s *observed) put(op Op, key string, r io.Reader, do func(io.Reader) error) error {
	start := time.Now()
	b := &body{r: r, op: op, key: key, o: s.o}
	err := do(b)
	s.o.Done(op, key, b.n, time.Since(start), err)
	return err
}

func (s *observed) Put(ctx context.Context, key string, r io.Reader) error {
	return s.put(OpPut, key, r, func(r io.Reader) error { return s.bs.Put(ctx, key, r) })
}

func (s *observed) PutIfAbsent(ctx context.Context, key string, r io.Reader) (etag string, err error) {
	err = s.put(OpPutIfAbsent, key, r, func(r io.Reader) error {
		etag, err = s.bs.PutIfAbsent(ctx, key, r)
		return err
	})
	return etag, err
}

func (s *observed) PutIfMatch(ctx context.Context, key, match string, r io.Reader) (etag string, err error) {
	err = s.put(OpPutIfMatch, key, r, func(r io.Reader) error {
		etag, err = s.bs.PutIfMatch(ctx, key, match, r)
		return err
	})
	return etag, err
}

// readBody reports a read's Done when it is closed.
type readBody struct {
	body
	rc    io.ReadCloser
	start time.Time
	once  sync.Once
}

// WriteTo implements io.WriterTo where the store's body does, so that
// observing a store does not take its copy path away from io.Copy (see
// resumingReader.WriteTo). The bytes written are counted as read: the
// body's WriteTo writes every byte it reads before it returns a read
// error. An error of w is not the read's.
func (b *readBody) WriteTo(w io.Writer) (int64, error) {
	wt, ok := b.rc.(io.WriterTo)
	if !ok {
		return io.CopyBuffer(writerOnly{w}, readerOnly{&b.body}, make([]byte, copyBufSize))
	}
	cw := &countingWriter{errWriter: errWriter{w: w}, b: &b.body}
	n, err := wt.WriteTo(cw)
	if err != nil && err != io.EOF && cw.err == nil && b.err == nil {
		b.err = err
	}
	return n, err
}

// countingWriter reports what it writes as read through b.
type countingWriter struct {
	errWriter
	b *body
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.errWriter.Write(p)
	if n > 0 {
		c.b.n += int64(n)
		c.b.o.Transferred(c.b.op, c.b.key, n)
	}
	return n, err
}

func (b *readBody) Close() error {
	err := b.rc.Close()
	b.once.Do(func() { b.o.Done(b.op, b.key, b.n, time.Since(b.start), b.err) })
	return err
}

func (s *observed) open(op Op, key string, get func() (io.ReadCloser, error)) (io.ReadCloser, error) {
	start := time.Now()
	rc, err := get()
	if err != nil {
		s.o.Done(op, key, 0, time.Since(start), err)
		return nil, err
	}
	return &readBody{body: body{r: rc, op: op, key: key, o: s.o}, rc: rc, start: start}, nil
}

func (s *observed) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	return s.open(OpGet, key, func() (io.ReadCloser, error) { return s.bs.Get(ctx, key) })
}

var _ InfoGetter = (*observed)(nil)

// GetWithInfo is observed as a Get: it is one read of the object.
func (s *observed) GetWithInfo(ctx context.Context, key string) (io.ReadCloser, ObjectInfo, error) {
	var info ObjectInfo
	rc, err := s.open(OpGet, key, func() (rc io.ReadCloser, err error) {
		rc, info, err = GetWithInfo(ctx, s.bs, key)
		return rc, err
	})
	if err != nil {
		return nil, ObjectInfo{}, err
	}
	return rc, info, nil
}

func (s *observed) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	return s.open(OpGetRange, key, func() (io.ReadCloser, error) { return s.bs.GetRange(ctx, key, off, n) })
}

func (s *observed) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	start := time.Now()
	info, err := s.bs.Stat(ctx, key)
	s.o.Done(OpStat, key, 0, time.Since(start), err)
	return info, err
}

func (s *observed) Exists(ctx context.Context, key string) (bool, error) {
	start := time.Now()
	ok, err := s.bs.Exists(ctx, key)
	s.o.Done(OpExists, key, 0, time.Since(start), err)
	return ok, err
}

func (s *observed) List(ctx context.Context, prefix string) iter.Seq2[ObjectInfo, error] {
	return func(yield func(ObjectInfo, error) bool) {
		start := time.Now()
		var lerr error
		defer func() { s.o.Done(OpList, prefix, 0, time.Since(start), lerr) }()
		for info, err := range s.bs.List(ctx, prefix) {
			if err != nil {
				lerr = err
			}
			if !yield(info, err) {
				return
			}
		}
	}
}

func (s *observed) Delete(ctx context.Context, key string) error {
	start := time.Now()
	err := s.bs.Delete(ctx, key)
	s.o.Done(OpDelete, key, 0, time.Since(start), err)
	return err
}

// IsExpected reports whether err is an answer rather than a failure: a
// missing key or a condition that did not hold. Metrics count these
// separately from failures (thanos objstore does the same for missing
// objects).
func IsExpected(err error) bool {
	return errors.Is(err, ErrNotFound) || errors.Is(err, ErrPreconditionFailed)
}
