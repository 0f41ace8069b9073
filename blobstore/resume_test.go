package blobstore_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
	"github.com/tidemark-io/tidemark/blobstore/memstore"
)

var errReset = errors.New("connection reset by peer")

// flakyStore hands out readers that fail after every cut bytes, the way a
// connection reset mid-body does, for the first fails opens.
type flakyStore struct {
	blobstore.Blobstore
	cut   int
	fails atomic.Int32
	opens atomic.Int32
}

func (f *flakyStore) wrap(rc io.ReadCloser) io.ReadCloser {
	f.opens.Add(1)
	if f.fails.Add(-1) < 0 {
		return rc
	}
	return struct {
		io.Reader
		io.Closer
	}{io.MultiReader(io.LimitReader(rc, int64(f.cut)), errorReader{}), rc}
}

type errorReader struct{}

func (errorReader) Read([]byte) (int, error) { return 0, errReset }

func (f *flakyStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	rc, err := f.Blobstore.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	return f.wrap(rc), nil
}

func (f *flakyStore) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	rc, err := f.Blobstore.GetRange(ctx, key, off, n)
	if err != nil {
		return nil, err
	}
	return f.wrap(rc), nil
}

func TestResumingReaderResumesWhereTheConnectionBroke(t *testing.T) {
	ctx := t.Context()
	data := blobstoretest.Payload(1, 1<<20)
	fs := &flakyStore{Blobstore: memstore.New(), cut: 100 << 10}
	fs.fails.Store(3)
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
	if n := fs.opens.Load(); n != 4 {
		t.Fatalf("opened the object %d times, want 4 (1 + 3 resumptions)", n)
	}
}

func TestResumingReaderGivesUpAfterItsRetries(t *testing.T) {
	ctx := t.Context()
	// Every reader fails before its first byte: no progress, so the
	// failures count up to the limit.
	fs := &flakyStore{Blobstore: memstore.New(), cut: 0}
	fs.fails.Store(100)
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
	if n := fs.opens.Load(); n != 3 {
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
	fs := &flakyStore{Blobstore: memstore.New(), cut: 10}
	fs.fails.Store(100)
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
