package blobstore_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
	"github.com/tidemark-io/tidemark/blobstore/memstore"
)

var errReset = errors.New("connection reset by peer")

// flaky returns a store whose first fails bodies break after cut bytes,
// the way a connection reset mid-body does.
func flaky(cut int, fails int32) *blobstoretest.Interceptor {
	var left atomic.Int32
	left.Store(fails)
	return blobstoretest.Intercept(memstore.New(), blobstoretest.Hooks{
		Read: func(_ *blobstoretest.Call, r io.Reader) io.Reader {
			if left.Add(-1) < 0 {
				return r
			}
			return io.MultiReader(io.LimitReader(r, int64(cut)), errorReader{})
		},
	})
}

// opens counts the bodies fs handed out.
func opens(fs *blobstoretest.Interceptor) int {
	return fs.Count(blobstore.OpGet, blobstore.OpGetRange)
}

type errorReader struct{}

func (errorReader) Read([]byte) (int, error) { return 0, errReset }

func TestResumingReaderResumesWhereTheConnectionBroke(t *testing.T) {
	ctx := t.Context()
	data := blobstoretest.Payload(1, 1<<20)
	fs := flaky(100<<10, 3)
	if err := fs.Put(ctx, "k", bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	rc, err := blobstore.NewResumingReader(ctx, fs, "k", 3)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read through 3 resets: %v", err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes that differ from the %d stored", len(got), len(data))
	}
	if n := opens(fs); n != 4 {
		t.Fatalf("opened the object %d times, want 4 (1 + 3 resumptions)", n)
	}
}

func TestResumingReaderGivesUpAfterItsRetries(t *testing.T) {
	ctx := t.Context()
	// Every reader fails before its first byte: no progress, so the
	// failures count up to the limit.
	fs := flaky(0, 100)
	if err := fs.Put(ctx, "k", bytes.NewReader(make([]byte, 1000))); err != nil {
		t.Fatal(err)
	}
	rc, err := blobstore.NewResumingReader(ctx, fs, "k", 2)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if _, err := io.ReadAll(rc); !errors.Is(err, errReset) {
		t.Fatalf("read = %v, want the reset after giving up", err)
	}
	if n := opens(fs); n != 3 {
		t.Fatalf("opened %d times, want 3 (1 + 2 resumptions)", n)
	}
}

func TestResumingReaderDoesNotRetryAMissingKey(t *testing.T) {
	if _, err := blobstore.NewResumingReader(t.Context(), memstore.New(), "nope", 3); !errors.Is(err, blobstore.ErrNotFound) {
		t.Fatalf("NewResumingReader of a missing key = %v, want ErrNotFound", err)
	}
}

func TestResumingReaderStopsWhenContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	fs := flaky(10, 100)
	if err := fs.Put(ctx, "k", bytes.NewReader(make([]byte, 1000))); err != nil {
		t.Fatal(err)
	}
	rc, err := blobstore.NewResumingReader(ctx, fs, "k", 50)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	buf := make([]byte, 10)
	if _, err := io.ReadFull(rc, buf); err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := io.ReadAll(rc); !errors.Is(err, context.Canceled) {
		t.Fatalf("read after cancel = %v, want context.Canceled", err)
	}
}

// copyBody gives a reader a WriteTo (io.Copy's: every byte read is
// written before a read error is returned), as s3store's bodies have.
type copyBody struct{ io.ReadCloser }

func (b copyBody) WriteTo(w io.Writer) (int64, error) {
	return io.Copy(w, struct{ io.Reader }{b.ReadCloser})
}

// wtStore hands out bodies with WriteTo.
type wtStore struct{ blobstore.Blobstore }

func (s wtStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	rc, err := s.Blobstore.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	return copyBody{rc}, nil
}

func (s wtStore) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	rc, err := s.Blobstore.GetRange(ctx, key, off, n)
	if err != nil {
		return nil, err
	}
	return copyBody{rc}, nil
}

// io.Copy from a resuming reader goes through the body's WriteTo and
// resumes after a broken connection there too, whether the bodies have a
// WriteTo or not; an error of the writer is not resumed after.
func TestResumingReaderWriteToResumes(t *testing.T) {
	ctx := t.Context()
	data := blobstoretest.Payload(2, 1<<20)
	for _, withWT := range []bool{true, false} {
		fs := flaky(100<<10, 3)
		if err := fs.Put(ctx, "k", bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
		var bs blobstore.Blobstore = fs
		if withWT {
			bs = wtStore{fs}
		}
		rc, err := blobstore.NewResumingReader(ctx, bs, "k", 3)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := rc.(io.WriterTo); !ok {
			t.Fatal("a resuming reader has no WriteTo")
		}
		var got bytes.Buffer
		n, err := io.Copy(&got, rc)
		rc.Close()
		if err != nil || n != int64(len(data)) || !bytes.Equal(got.Bytes(), data) {
			t.Fatalf("WriteTo (body with WriteTo: %v) through 3 resets: %d bytes, %v, equal %v", withWT, n, err, bytes.Equal(got.Bytes(), data))
		}
		if n := opens(fs); n != 4 {
			t.Fatalf("opened the object %d times, want 4 (1 + 3 resumptions)", n)
		}
	}

	// A failing writer: its error, at once, no resumption.
	fs := flaky(100<<10, 0)
	if err := fs.Put(ctx, "k", bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	rc, err := blobstore.NewResumingReader(ctx, wtStore{fs}, "k", 3)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	full := errors.New("disk full")
	written := 0
	w := writerFunc(func(p []byte) (int, error) {
		if written+len(p) > 200<<10 {
			return 0, full
		}
		written += len(p)
		return len(p), nil
	})
	if _, err := io.Copy(w, rc); !errors.Is(err, full) {
		t.Fatalf("io.Copy into a failing writer = %v, want its error", err)
	}
	if n := opens(fs); n != 1 {
		t.Fatalf("opened %d times after a write error, want 1", n)
	}
	// A short write is an error of the writer too.
	rc2, err := blobstore.NewResumingReader(ctx, wtStore{fs}, "k", 3)
	if err != nil {
		t.Fatal(err)
	}
	defer rc2.Close()
	if _, err := rc2.(io.WriterTo).WriteTo(writerFunc(func(p []byte) (int, error) { return len(p) / 2, nil })); err != io.ErrShortWrite {
		t.Fatalf("short write: %v, want io.ErrShortWrite", err)
	}
	if n := opens(fs); n != 2 {
		t.Fatalf("opened %d times in all, want 2", n)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// countObserver adds up what it is told of Gets.
type countObserver struct {
	transferred atomic.Int64
	done        atomic.Int64
	doneErr     atomic.Value
}

func (o *countObserver) Transferred(_ blobstore.Op, _ string, n int) { o.transferred.Add(int64(n)) }
func (o *countObserver) Done(_ blobstore.Op, _ string, n int64, _ time.Duration, err error) {
	o.done.Add(n)
	if err != nil {
		o.doneErr.Store(err)
	}
}

// An observed store's bodies keep the store's WriteTo and count what it
// copies, through a resuming reader too; a read error is the read's, a
// write error is not.
func TestObservedBodyWriteToCounts(t *testing.T) {
	ctx := t.Context()
	data := blobstoretest.Payload(3, 1<<20)
	fs := flaky(300<<10, 1)
	if err := fs.Put(ctx, "k", bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	o := &countObserver{}
	bs := blobstore.WithResumingReads(blobstore.Observe(wtStore{fs}, o), 3)
	rc, err := bs.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	n, err := io.Copy(&got, rc)
	rc.Close()
	if err != nil || n != int64(len(data)) || !bytes.Equal(got.Bytes(), data) {
		t.Fatalf("io.Copy: %d bytes, %v", n, err)
	}
	if tr, d := o.transferred.Load(), o.done.Load(); tr != int64(len(data)) || d != int64(len(data)) {
		t.Errorf("observed %d bytes transferred, %d done; want %d", tr, d, len(data))
	}
	// The broken first body was reported with its error.
	if err, _ := o.doneErr.Load().(error); !errors.Is(err, errReset) {
		t.Errorf("the broken body's Done error = %v, want the reset", err)
	}

	// A writer's error is not reported as the read's.
	o = &countObserver{}
	rc, err = blobstore.Observe(wtStore{fs}, o).Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	full := errors.New("disk full")
	if _, err := rc.(io.WriterTo).WriteTo(writerFunc(func([]byte) (int, error) { return 0, full })); !errors.Is(err, full) {
		t.Fatalf("WriteTo into a failing writer = %v", err)
	}
	rc.Close()
	if err, _ := o.doneErr.Load().(error); err != nil {
		t.Errorf("Done reported %v for a writer's error", err)
	}
}
