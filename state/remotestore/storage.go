// Package remotestore is Pebble's objstorage/remote.Storage on any
// blobstore.Blobstore: the seam that lets a Pebble database create its
// SSTs directly in an object store (S3, MinIO, a filestore, the in-memory
// store) and read them back block by block.
//
// # Mapping
//
// Every object name Pebble uses is stored under one key prefix the caller
// chooses: name n is key prefix+"/"+n (or n for an empty prefix).
//
//   - ReadObject stats the object once for its size; the returned
//     ObjectReader's ReadAt is one ranged read (GetRange) per call,
//     stateless and safe for parallel use. A read that would pass the end
//     of the object fails, and so does a body that ends early (the object
//     was truncated or replaced since it was opened): ReadAt never returns
//     fewer bytes than asked, and never stale ones silently.
//   - CreateObject streams into one Put through an io.Pipe: Pebble's
//     writes go straight to the store with the store's own bounded memory
//     (multipart parts on S3), Close returns the Put's result, and the
//     object appears atomically when Close succeeds. Abort (not part of
//     Pebble's interface) makes the Put fail so that nothing appears.
//   - List pages through the store underneath and applies Pebble's
//     delimiter semantics (see Storage.List).
//   - Delete is idempotent; Size is a Stat; IsNotExistError recognises
//     blobstore.ErrNotFound.
//
// Every error names the key it concerns, so a missing object surfaces in
// Pebble's error ("remotestore: read \"jobs/a/000012.sst\": …: not found")
// rather than as a bare file number.
//
// # What this layer does not check
//
// Pebble checksums every block it reads, so a corrupted object fails with
// Pebble's corruption error; a truncated one fails here or on its footer.
// What no block checksum can catch is an object replaced by another
// well-formed one under the same name: keeping names unique per writer is
// the caller's job (package state puts each writer's objects under a
// locator of its own).
package remotestore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/objstorage/remote"
	"github.com/tidemark-io/tidemark/blobstore"
)

// ErrClosed reports an operation on a Storage after Close.
var ErrClosed = errors.New("remotestore: closed")

// ErrObjectChanged reports a read that found the object shorter than the
// size it was opened with (truncated or replaced since).
var ErrObjectChanged = errors.New("remotestore: object changed since it was opened")

// Options configure a Storage. The zero value is usable.
type Options struct {
	// ReadRetries is how many times ReadAt re-requests the rest of a range
	// whose body broke off mid-read (a reset connection), in a row, before
	// failing. A missing object is never retried. Zero means 3; negative
	// means none.
	ReadRetries int
}

// Storage is a remote.Storage whose objects live in a Blobstore under a
// key prefix. It is safe for concurrent use.
type Storage struct {
	bs      blobstore.Blobstore
	prefix  string // "" or ending in "/"
	retries int

	// ctx bounds the uploads CreateObject starts (Pebble's interface gives
	// them no context of their own); Close cancels it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // running uploads
	mu     sync.Mutex     // guards closed against wg.Add
	closed bool
}

var _ remote.Storage = (*Storage)(nil)

// New returns a Storage that keeps object name n at key prefix+"/"+n in
// bs. prefix must be empty or a valid key (a trailing '/' is dropped).
func New(bs blobstore.Blobstore, prefix string, opts Options) (*Storage, error) {
	prefix = strings.TrimSuffix(prefix, "/")
	if prefix != "" {
		if err := blobstore.ValidateKey(prefix); err != nil {
			return nil, fmt.Errorf("remotestore: prefix: %w", err)
		}
		prefix += "/"
	}
	retries := opts.ReadRetries
	switch {
	case retries == 0:
		retries = 3
	case retries < 0:
		retries = 0
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Storage{bs: bs, prefix: prefix, retries: retries, ctx: ctx, cancel: cancel}, nil
}

// Key returns the store key of object name, or an error wrapping
// blobstore.ErrInvalidKey for a name that cannot be a key.
func (s *Storage) Key(name string) (string, error) {
	key := s.prefix + name
	if err := blobstore.ValidateKey(key); err != nil {
		return "", fmt.Errorf("remotestore: object %q: %w", name, err)
	}
	return key, nil
}

// Close cancels uploads still running, waits for them, and makes later
// operations fail with ErrClosed. It is idempotent. Pebble never closes
// the storages it is given; their owner does, after closing the database.
func (s *Storage) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	return nil
}

func (s *Storage) checkOpen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	return nil
}

// ReadObject returns a reader of object name and its size (one Stat).
func (s *Storage) ReadObject(ctx context.Context, name string) (remote.ObjectReader, int64, error) {
	key, err := s.Key(name)
	if err != nil {
		return nil, 0, err
	}
	if err := s.checkOpen(); err != nil {
		return nil, 0, fmt.Errorf("remotestore: read %q: %w", key, err)
	}
	info, err := s.bs.Stat(ctx, key)
	if err != nil {
		return nil, 0, fmt.Errorf("remotestore: read %q: %w", key, err)
	}
	return &objectReader{s: s, key: key, size: info.Size}, info.Size, nil
}

type objectReader struct {
	s    *Storage
	key  string
	size int64 // as stated when opened
}

// ReadAt fills p from offset with ranged reads, resuming after a broken
// body; see the package doc for its guarantees.
func (r *objectReader) ReadAt(ctx context.Context, p []byte, offset int64) error {
	if err := r.s.checkOpen(); err != nil {
		return fmt.Errorf("remotestore: read %q: %w", r.key, err)
	}
	if offset < 0 || offset+int64(len(p)) > r.size {
		return fmt.Errorf("remotestore: read %q: bytes [%d, %d) are outside the object's %d bytes: %w",
			r.key, offset, offset+int64(len(p)), r.size, io.ErrUnexpectedEOF)
	}
	failed := 0
	for len(p) > 0 {
		n, err := r.readOnce(ctx, p, offset)
		p, offset = p[n:], offset+int64(n)
		if err == nil {
			continue
		}
		if n > 0 {
			failed = 0
		}
		if errors.Is(err, blobstore.ErrNotFound) || errors.Is(err, blobstore.ErrInvalidKey) ||
			ctx.Err() != nil || failed >= r.s.retries {
			return fmt.Errorf("remotestore: read %q at %d: %w", r.key, offset, err)
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			// A body that ends early is a broken connection (net/http
			// reports a short body so) or an object that shrank since it
			// was opened; only the first is worth another request.
			info, serr := r.s.bs.Stat(ctx, r.key)
			if serr != nil {
				return fmt.Errorf("remotestore: read %q at %d: %w", r.key, offset, errors.Join(err, serr))
			}
			if info.Size != r.size {
				return fmt.Errorf("remotestore: read %q at %d: the object is %d bytes, not the %d it had when opened: %w: %w",
					r.key, offset, info.Size, r.size, ErrObjectChanged, io.ErrUnexpectedEOF)
			}
		}
		failed++
		select {
		case <-ctx.Done():
			return fmt.Errorf("remotestore: read %q at %d: %w", r.key, offset, ctx.Err())
		case <-time.After(time.Duration(failed) * 20 * time.Millisecond):
		}
	}
	return nil
}

// readOnce reads as much of p as one GetRange yields. A body that ends
// before p is full is io.ErrUnexpectedEOF.
func (r *objectReader) readOnce(ctx context.Context, p []byte, offset int64) (int, error) {
	rc, err := r.s.bs.GetRange(ctx, r.key, offset, int64(len(p)))
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	n, err := io.ReadFull(rc, p)
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// Close releases nothing: a reader holds no connection between reads.
func (r *objectReader) Close() error { return nil }

// CreateObject returns a writer whose bytes stream into a Put of object
// name. The object appears, atomically and replacing any earlier one,
// only when Close returns nil.
func (s *Storage) CreateObject(name string) (io.WriteCloser, error) {
	key, err := s.Key(name)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, fmt.Errorf("remotestore: create %q: %w", key, ErrClosed)
	}
	s.wg.Add(1)
	s.mu.Unlock()

	pr, pw := io.Pipe()
	w := &objectWriter{key: key, pw: pw, done: make(chan struct{})}
	go func() {
		defer s.wg.Done()
		err := s.bs.Put(s.ctx, key, pr)
		if err != nil {
			err = fmt.Errorf("remotestore: create %q: %w", key, err)
		}
		w.err = err
		// Unblock a Write waiting for a reader that will never read again.
		pr.CloseWithError(cmp.Or(err, errWriteAfterPut))
		close(w.done)
	}()
	return w, nil
}

// errWriteAfterPut is what a Write sees if the Put finished (it can only
// have failed, since the pipe was not closed) while bytes were still
// coming.
var errWriteAfterPut = errors.New("remotestore: upload ended before the writer was closed")

// ObjectWriter is the writer CreateObject returns. Besides io.WriteCloser
// it has Abort, for callers that can tell a failed object from a complete
// one (Pebble closes a writer even when it gives up on the object).
type ObjectWriter interface {
	io.WriteCloser
	// Abort makes the upload fail with cause: nothing appears in the
	// store. It waits for the upload to end. After Close, it does nothing.
	Abort(cause error)
}

type objectWriter struct {
	key    string
	pw     *io.PipeWriter
	done   chan struct{}
	err    error // the Put's result, set before done closes
	closed bool
}

var _ ObjectWriter = (*objectWriter)(nil)

func (w *objectWriter) Write(p []byte) (int, error) {
	if w.closed {
		return 0, fmt.Errorf("remotestore: create %q: write after close", w.key)
	}
	n, err := w.pw.Write(p)
	if err != nil {
		<-w.done
		return n, cmp.Or(w.err, err)
	}
	return n, nil
}

// Close ends the stream and returns the Put's result: nil means the
// object is complete and visible. Later calls return the same result.
func (w *objectWriter) Close() error {
	if !w.closed {
		w.closed = true
		_ = w.pw.Close()
	}
	<-w.done
	return w.err
}

func (w *objectWriter) Abort(cause error) {
	if w.closed {
		return
	}
	w.closed = true
	_ = w.pw.CloseWithError(fmt.Errorf("remotestore: create %q: aborted: %w", w.key, cmp.Or(cause, errors.New("no cause given"))))
	<-w.done
}

// List returns the names of the objects whose names start with prefix,
// with prefix trimmed and in lexicographic order (Pebble accepts any
// order). With a non-empty delimiter, prefix names a directory (the
// delimiter is appended unless prefix is empty or already ends with it),
// and names that contain the delimiter after it are grouped into one
// result, the part before the delimiter. This reproduces the examples of
// remote.Storage's documentation: with objects a, b/4, b/5 and b/6,
//
//	List("", "")   -> a, b/4, b/5, b/6
//	List("", "/")  -> a, b
//	List("b", "/") -> 4, 5, 6
//	List("b", "")  -> /4, /5, /6
func (s *Storage) List(prefix, delimiter string) ([]string, error) {
	if err := s.checkOpen(); err != nil {
		return nil, fmt.Errorf("remotestore: list %q: %w", s.prefix+prefix, err)
	}
	if delimiter != "" && prefix != "" && !strings.HasSuffix(prefix, delimiter) {
		prefix += delimiter
	}
	full := s.prefix + prefix
	if err := blobstore.ValidatePrefix(full); err != nil {
		return nil, fmt.Errorf("remotestore: list %q: %w", full, err)
	}
	var names []string
	for info, err := range s.bs.List(s.ctx, full) {
		if err != nil {
			return nil, fmt.Errorf("remotestore: list %q: %w", full, err)
		}
		name, ok := strings.CutPrefix(info.Key, full)
		if !ok {
			return nil, fmt.Errorf("remotestore: list %q: the store returned %q, outside the prefix", full, info.Key)
		}
		if delimiter != "" {
			if i := strings.Index(name, delimiter); i >= 0 {
				name = name[:i]
			}
		}
		// Keys come sorted, so a group's members are adjacent.
		if n := len(names); n > 0 && names[n-1] == name {
			continue
		}
		names = append(names, name)
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// Delete removes object name; deleting a missing object succeeds.
func (s *Storage) Delete(name string) error {
	key, err := s.Key(name)
	if err != nil {
		return err
	}
	if err := s.checkOpen(); err != nil {
		return fmt.Errorf("remotestore: delete %q: %w", key, err)
	}
	if err := s.bs.Delete(s.ctx, key); err != nil {
		return fmt.Errorf("remotestore: delete %q: %w", key, err)
	}
	return nil
}

// Size returns the size of object name (one Stat).
func (s *Storage) Size(name string) (int64, error) {
	key, err := s.Key(name)
	if err != nil {
		return 0, err
	}
	if err := s.checkOpen(); err != nil {
		return 0, fmt.Errorf("remotestore: size %q: %w", key, err)
	}
	info, err := s.bs.Stat(s.ctx, key)
	if err != nil {
		return 0, fmt.Errorf("remotestore: size %q: %w", key, err)
	}
	return info.Size, nil
}

// IsNotExistError reports whether err says an object does not exist
// (it wraps blobstore.ErrNotFound).
func (s *Storage) IsNotExistError(err error) bool {
	return errors.Is(err, blobstore.ErrNotFound)
}
