package blobstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// NewResumingReader returns a reader of the object at key that survives a
// connection lost mid-body: when a read fails (for any reason but ctx's
// end), it reopens the object with GetRange from the first byte not yet
// read and goes on, up to retries times in a row, with a short backoff.
// A missing or invalid key is not retried.
//
// SDK retries cover a request until its response headers arrive; a reset
// while the body streams fails the whole read, and with it, say, the
// restore of a large state. Resuming is sound only for objects that do not
// change while they are read (checkpoint files are immutable and their
// digests are checked after the read, so a mixed read cannot pass
// unnoticed).
func NewResumingReader(ctx context.Context, bs Blobstore, key string, retries int) (io.ReadCloser, error) {
	rc, err := bs.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	return &resumingReader{ctx: ctx, bs: bs, key: key, rc: rc, retries: retries}, nil
}

type resumingReader struct {
	ctx     context.Context
	bs      Blobstore
	key     string
	rc      io.ReadCloser
	off     int64 // bytes read so far: where a resumption starts
	retries int
	failed  int   // consecutive failed resumptions
	pending error // a read failure not yet resumed from
}

func (r *resumingReader) Read(p []byte) (int, error) {
	for {
		if err := r.pending; err != nil {
			r.pending = nil
			if rerr := r.resume(err); rerr != nil {
				return 0, rerr
			}
		}
		n, err := r.rc.Read(p)
		r.off += int64(n)
		if n > 0 {
			r.failed = 0
		}
		switch {
		case err == nil || err == io.EOF:
			return n, err
		case n > 0:
			// Hand over the bytes now and resume on the next Read.
			r.pending = err
			return n, nil
		default:
			r.pending = err
		}
	}
}

// resume reopens the object from r.off after err, or returns why it
// cannot.
func (r *resumingReader) resume(err error) error {
	for {
		if cerr := r.ctx.Err(); cerr != nil {
			return fmt.Errorf("%w (after %v)", cerr, err)
		}
		if errors.Is(err, ErrNotFound) || errors.Is(err, ErrInvalidKey) {
			return err
		}
		if r.failed >= r.retries {
			return fmt.Errorf("blobstore: read %q at byte %d: %w (gave up after %d resumptions)", r.key, r.off, err, r.failed)
		}
		r.failed++
		r.rc.Close()
		r.rc = io.NopCloser(errReader{err})
		select {
		case <-time.After(time.Duration(r.failed) * 100 * time.Millisecond):
		case <-r.ctx.Done():
			continue
		}
		rc, gerr := r.bs.GetRange(r.ctx, r.key, r.off, -1)
		if gerr != nil {
			err = gerr
			continue
		}
		r.rc = rc
		return nil
	}
}

func (r *resumingReader) Close() error { return r.rc.Close() }

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
