package s3store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/integration/miniotest"
)

// downloadSize is four and a bit parts.
const downloadSize = 4*testPartSize + 12345

// concurrency sets Options.Concurrency to n, for newStore.
func concurrency(n int) func(*Options) {
	return func(o *Options) { o.Concurrency = n }
}

// putK stores data under the key "k" of s.
func putK(t *testing.T, s *Store, data []byte) {
	t.Helper()
	if err := s.Put(context.Background(), "k", stream(data)); err != nil {
		t.Fatal(err)
	}
}

// getParallelK opens the key "k" of s with GetParallel.
func getParallelK(ctx context.Context, t *testing.T, s *Store) io.ReadCloser {
	t.Helper()
	rc, err := s.GetParallel(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

func TestGetParallelYieldsTheObjectInOrder(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, miniotest.Shared(t), concurrency(2))
	data := randomBytes(downloadSize, 9)
	putK(t, s, data)
	rc := getParallelK(ctx, t, s)
	h := sha256.New()
	var got bytes.Buffer
	if _, err := io.Copy(io.MultiWriter(h, &got), rc); err != nil {
		t.Fatal(err)
	}
	rc.Close()
	if !bytes.Equal(got.Bytes(), data) {
		t.Fatalf("got %d bytes, differing from the %d written", got.Len(), len(data))
	}
	if want := sha256.Sum256(data); !bytes.Equal(h.Sum(nil), want[:]) {
		t.Error("digest differs")
	}
}

func TestGetParallelFailsWhenTheObjectIsReplaced(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, miniotest.Shared(t), concurrency(2))
	putK(t, s, randomBytes(downloadSize, 10))
	rc := getParallelK(ctx, t, s)
	defer rc.Close()
	// Consume the first part exactly: with two slots, parts 1 and 2 are
	// fetched, part 3 not before part 1 is released.
	if _, err := io.CopyN(io.Discard, rc, testPartSize); err != nil {
		t.Fatal(err)
	}
	putK(t, s, randomBytes(downloadSize, 11))
	if _, err := io.Copy(io.Discard, rc); !errors.Is(err, blobstore.ErrPreconditionFailed) {
		t.Fatalf("reading a replaced object: got %v, want ErrPreconditionFailed", err)
	}
}

func TestGetParallelCloseEarly(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, miniotest.Shared(t), concurrency(3))
	putK(t, s, randomBytes(downloadSize, 12))
	rc := getParallelK(ctx, t, s)
	if _, err := io.CopyN(io.Discard, rc, 100); err != nil {
		t.Fatal(err)
	}
	if err := rc.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Read(make([]byte, 1)); err == nil {
		t.Error("read after close succeeded")
	}
}

func TestDownloadWritesTheObjectToAFile(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, miniotest.Shared(t), nil)
	for _, size := range []int{0, 1000, downloadSize} {
		data := randomBytes(size, 13)
		putK(t, s, data)
		path := filepath.Join(t.TempDir(), "f")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		n, err := s.Download(ctx, "k", f)
		f.Close()
		if err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		got, _ := os.ReadFile(path)
		if n != int64(size) || !bytes.Equal(got, data) {
			t.Errorf("size %d: downloaded %d bytes, file %d bytes, equal %v", size, n, len(got), bytes.Equal(got, data))
		}
	}
	if _, err := s.Download(ctx, "missing", nil); !errors.Is(err, blobstore.ErrNotFound) {
		t.Errorf("missing key: got %v, want ErrNotFound", err)
	}
}

// isRangedGet matches the ranged GETs of GetParallel and Download.
func isRangedGet(req *http.Request) bool {
	return req.Method == http.MethodGet && req.Header.Get("Range") != ""
}

func TestGetParallelHoldsAtMostConcurrencyBuffers(t *testing.T) {
	const conc = 2
	ctx := context.Background()
	gate := &gatedTransport{base: http.DefaultTransport, hold: isRangedGet, release: make(chan struct{})}
	s := newStore(t, miniotest.Shared(t), func(o *Options) {
		o.Concurrency = conc
		o.HTTPClient = &http.Client{Transport: gate}
	})
	data := randomBytes(8*testPartSize+1, 15)
	putK(t, s, data)
	before := s.bufs.allocs.Load() // the upload's, cached now

	rc := getParallelK(ctx, t, s)
	defer rc.Close()
	// With every fetch held, the scheduler must stop at Concurrency.
	waitHeld(t, gate, conc)
	if got := gate.held.Load(); got != conc {
		t.Errorf("%d ranged GETs started before the reader consumed anything, want concurrency = %d", got, conc)
	}
	close(gate.release)
	var got bytes.Buffer
	if _, err := io.Copy(&got, rc); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), data) {
		t.Fatalf("got %d bytes, differing from the %d written", got.Len(), len(data))
	}
	// The upload left concurrency+1 buffers in the cache; nine parts read
	// through two slots need no new one.
	if allocated := s.bufs.allocs.Load() - before; allocated != 0 {
		t.Errorf("GetParallel allocated %d part buffers with %d cached, want 0", allocated, before)
	}
}

func TestGetParallelAllocatesAtMostConcurrencyBuffers(t *testing.T) {
	const conc = 2
	ctx := context.Background()
	writer := newStore(t, miniotest.Shared(t), nil)
	data := randomBytes(8*testPartSize+1, 16)
	putK(t, writer, data)
	// A fresh Store on the same bucket, with an empty cache.
	s := newStore(t, miniotest.Shared(t), func(o *Options) { o.Bucket = writer.bucket; o.Concurrency = conc })
	for i := range 2 {
		rc := getParallelK(ctx, t, s)
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("read %d: got %d bytes, differing from the %d written", i, len(got), len(data))
		}
	}
	if got := s.bufs.allocs.Load(); got > conc {
		t.Errorf("%d part buffers allocated for two reads of nine parts, want at most concurrency = %d", got, conc)
	}
}

// chunkWriter records the size of every Write.
type chunkWriter struct {
	bytes.Buffer
	writes []int
}

func (w *chunkWriter) Write(p []byte) (int, error) {
	w.writes = append(w.writes, len(p))
	return w.Buffer.Write(p)
}

func TestGetParallelWritesEachPartInOneWrite(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, miniotest.Shared(t), concurrency(2))
	data := randomBytes(downloadSize, 17)
	putK(t, s, data)
	rc := getParallelK(ctx, t, s)
	defer rc.Close()
	// Half a part through Read first: WriteTo goes on from there.
	head := make([]byte, testPartSize/2)
	if _, err := io.ReadFull(rc, head); err != nil {
		t.Fatal(err)
	}
	var w chunkWriter
	n, err := io.Copy(&w, rc)
	if err != nil {
		t.Fatal(err)
	}
	if got := append(head, w.Bytes()...); n != int64(len(data)-len(head)) || !bytes.Equal(got, data) {
		t.Fatalf("copied %d bytes, got %d in all, differing from the %d written", n, len(got), len(data))
	}
	want := []int{testPartSize / 2, testPartSize, testPartSize, testPartSize, 12345}
	if !slices.Equal(w.writes, want) {
		t.Errorf("writes of %v bytes, want %v (one per part, from its buffer)", w.writes, want)
	}
}

func TestGetParallelCancelledIsNotACleanEOF(t *testing.T) {
	s := newStore(t, miniotest.Shared(t), concurrency(2))
	putK(t, s, randomBytes(downloadSize, 18))
	ctx, cancel := context.WithCancel(context.Background())
	rc := getParallelK(ctx, t, s)
	defer rc.Close()
	// Read the first part and let the second fetch finish; cancel while
	// the scheduler waits for a slot for the third. The two parts read
	// are not the object: the reader must not end with a clean EOF.
	if _, err := io.CopyN(io.Discard, rc, testPartSize); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	cancel()
	n, err := io.Copy(io.Discard, rc)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("after cancel: read %d more bytes and got %v, want context.Canceled", n, err)
	}
}

func TestDownloadAllocatesNoPartBuffers(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, miniotest.Shared(t), nil)
	data := randomBytes(downloadSize, 19)
	putK(t, s, data)
	before := s.bufs.allocs.Load()
	cached := s.bufs.cached()
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := s.Download(ctx, "k", f); err != nil {
		t.Fatal(err)
	}
	if got := s.bufs.allocs.Load() - before; got != 0 {
		t.Errorf("Download allocated %d part buffers, want 0", got)
	}
	if got := s.bufs.cached(); got != cached {
		t.Errorf("Download changed the cached buffers from %d to %d, want it not to use them", cached, got)
	}
	got, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Errorf("file holds %d bytes, differing from the %d written", len(got), len(data))
	}
}
