package s3store

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/integration/miniotest"
)

// Sizes on both sides of the single-PutObject / multipart boundary.
var putSizes = []struct {
	name string
	size int
}{
	{"single part", 1 << 20},
	{"multipart", 12 << 20},
}

func TestPutIfAbsentMultipartOnExistingKeyFailsAndLeavesNoUpload(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, miniotest.Shared(t), nil)
	old := []byte("old")
	if _, err := s.PutIfAbsent(ctx, "k", stream(old)); err != nil {
		t.Fatal(err)
	}
	_, err := s.PutIfAbsent(ctx, "k", stream(randomBytes(12<<20, 1)))
	if !errors.Is(err, blobstore.ErrPreconditionFailed) {
		t.Fatalf("PutIfAbsent of 12 MiB on an existing key: got %v, want ErrPreconditionFailed", err)
	}
	if got := readAll(t, s, "k"); !bytes.Equal(got, old) {
		t.Errorf("object changed to %d bytes", len(got))
	}
	assertNoUploads(t, s, "k")
}

func TestPutIfAbsentMultipartCreates(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, miniotest.Shared(t), nil)
	data := randomBytes(12<<20, 2)
	etag, err := s.PutIfAbsent(ctx, "k", stream(data))
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Stat(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if info.ETag != etag || info.Size != int64(len(data)) {
		t.Errorf("stat = %+v, want etag %q size %d", info, etag, len(data))
	}
	if !strings.HasSuffix(etag, "-3") {
		t.Errorf("etag %q is not a 3-part multipart etag: the multipart path was not taken", etag)
	}
	if got := readAll(t, s, "k"); !bytes.Equal(got, data) {
		t.Error("content differs")
	}
}

func TestPutIfMatchMultipart(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, miniotest.Shared(t), nil)
	etag, err := s.PutIfAbsent(ctx, "k", stream([]byte("v1")))
	if err != nil {
		t.Fatal(err)
	}
	v2 := randomBytes(12<<20, 3)

	t.Run("wrong etag fails and leaves no upload", func(t *testing.T) {
		_, err := s.PutIfMatch(ctx, "k", "0123456789abcdef0123456789abcdef", stream(v2))
		if !errors.Is(err, blobstore.ErrPreconditionFailed) {
			t.Fatalf("got %v, want ErrPreconditionFailed", err)
		}
		assertNoUploads(t, s, "k")
	})
	t.Run("right etag replaces", func(t *testing.T) {
		newETag, err := s.PutIfMatch(ctx, "k", etag, stream(v2))
		if err != nil {
			t.Fatal(err)
		}
		if newETag == etag {
			t.Errorf("etag did not change: %q", newETag)
		}
		if got := readAll(t, s, "k"); !bytes.Equal(got, v2) {
			t.Error("content differs")
		}
		// The old ETag no longer matches.
		if _, err := s.PutIfMatch(ctx, "k", etag, stream(v2)); !errors.Is(err, blobstore.ErrPreconditionFailed) {
			t.Fatalf("PutIfMatch with the replaced etag: got %v, want ErrPreconditionFailed", err)
		}
		assertNoUploads(t, s, "k")
	})
	t.Run("missing key fails", func(t *testing.T) {
		_, err := s.PutIfMatch(ctx, "absent", etag, stream(v2))
		if !errors.Is(err, blobstore.ErrPreconditionFailed) {
			t.Fatalf("got %v, want ErrPreconditionFailed", err)
		}
		assertAbsent(t, s, "absent")
		assertNoUploads(t, s, "absent")
	})
}

// failingReader yields n bytes of data, then fails.
type failingReader struct {
	r   io.Reader
	err error
}

func (f *failingReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		return n, f.err
	}
	return n, err
}

func TestPutReaderErrorLeavesNothing(t *testing.T) {
	for _, sz := range putSizes {
		t.Run(sz.name, func(t *testing.T) {
			s := newStore(t, miniotest.Shared(t), nil)
			boom := errors.New("boom")
			err := s.Put(context.Background(), "k", &failingReader{r: bytes.NewReader(randomBytes(sz.size, 4)), err: boom})
			if !errors.Is(err, boom) {
				t.Fatalf("got %v, want the reader's error", err)
			}
			assertAbsent(t, s, "k")
			assertNoUploads(t, s, "k")
		})
	}
}

// cancellingReader yields n bytes, then cancels the context and blocks a
// moment (as a reader waiting on the network would), then goes on
// producing data as if nothing happened.
type cancellingReader struct {
	r      io.Reader
	left   int
	cancel context.CancelFunc
	once   sync.Once
}

func (c *cancellingReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		c.once.Do(func() {
			c.cancel()
			time.Sleep(50 * time.Millisecond)
		})
		return c.r.Read(p)
	}
	n, err := c.r.Read(p[:min(len(p), c.left)])
	c.left -= n
	return n, err
}

func TestPutCancelledMidStreamLeavesNothing(t *testing.T) {
	for _, sz := range putSizes {
		t.Run(sz.name, func(t *testing.T) {
			s := newStore(t, miniotest.Shared(t), nil)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			r := &cancellingReader{r: bytes.NewReader(randomBytes(sz.size, 5)), left: sz.size / 2, cancel: cancel}
			err := s.Put(ctx, "k", r)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("got %v, want context.Canceled", err)
			}
			assertAbsent(t, s, "k")
			assertNoUploads(t, s, "k")
		})
	}
}

// gatedTransport holds every request that hold matches (by default
// UploadPart) until release is closed.
type gatedTransport struct {
	base    http.RoundTripper
	hold    func(*http.Request) bool
	release chan struct{}
	held    atomic.Int32
}

func isUploadPart(req *http.Request) bool {
	return req.Method == http.MethodPut && req.URL.Query().Has("partNumber")
}

func (g *gatedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	hold := g.hold
	if hold == nil {
		hold = isUploadPart
	}
	if hold(req) {
		g.held.Add(1)
		<-g.release
	}
	return g.base.RoundTrip(req)
}

// waitHeld waits until gate holds want requests, then a moment more for
// any that should not come.
func waitHeld(t *testing.T, gate *gatedTransport, want int32) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for gate.held.Load() < want && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
}

// countingReader counts the bytes read from it.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func TestPutReadsAtMostConcurrencyPlusOnePartsAhead(t *testing.T) {
	const conc = 2
	gate := &gatedTransport{base: http.DefaultTransport, release: make(chan struct{})}
	s := newStore(t, miniotest.Shared(t), func(o *Options) {
		o.Concurrency = conc
		o.HTTPClient = &http.Client{Transport: gate}
	})
	size := 8 * testPartSize
	r := &countingReader{r: bytes.NewReader(randomBytes(size, 6))}
	done := make(chan error, 1)
	go func() { done <- s.Put(context.Background(), "k", onlyReader{r}) }()

	// Wait until every worker holds a part, then give the reader time to
	// run ahead if it could.
	waitHeld(t, gate, conc)
	read := r.n.Load()
	allocated := s.bufs.allocs.Load()
	close(gate.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if limit := int64(conc+1) * testPartSize; read > limit {
		t.Errorf("reader was %d bytes ahead of the uploads, more than (concurrency+1) parts = %d", read, limit)
	}
	if read < int64(conc)*testPartSize {
		t.Errorf("only %d bytes read while %d parts were in flight", read, conc)
	}
	if allocated > conc+1 {
		t.Errorf("%d part buffers allocated while the parts were held, want at most concurrency+1 = %d", allocated, conc+1)
	}
	if got := readAll(t, s, "k"); len(got) != size {
		t.Errorf("got %d bytes, want %d", len(got), size)
	}
}

func TestPutAllocatesAtMostConcurrencyPlusOneBuffersAcrossUploads(t *testing.T) {
	const conc = 2
	s := newStore(t, miniotest.Shared(t), func(o *Options) { o.Concurrency = conc })
	data := randomBytes(8*testPartSize+1, 8)
	// Three uploads of nine parts each: the buffers of the first are
	// reused by the parts after them and by the next uploads, none is
	// left to the garbage collector and replaced.
	for i := range 3 {
		if err := s.Put(context.Background(), "k", stream(data)); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	if got := s.bufs.allocs.Load(); got > conc+1 {
		t.Errorf("%d part buffers allocated for three uploads, want at most concurrency+1 = %d", got, conc+1)
	}
	if got := readAll(t, s, "k"); !bytes.Equal(got, data) {
		t.Errorf("got %d bytes, differing from the %d written", len(got), len(data))
	}
}

// failingTransport fails every UploadPart request of part number 2
// without sending it.
type failingTransport struct{ base http.RoundTripper }

func (f failingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if isUploadPart(req) && req.URL.Query().Get("partNumber") == "2" {
		return nil, errors.New("injected: connection reset")
	}
	return f.base.RoundTrip(req)
}

func TestPutDoesNotReuseTheBufferOfAFailedPart(t *testing.T) {
	s := newStore(t, miniotest.Shared(t), func(o *Options) {
		o.Concurrency = 1
		o.MaxAttempts = 1
		o.HTTPClient = &http.Client{Transport: failingTransport{http.DefaultTransport}}
	})
	err := s.Put(context.Background(), "k", stream(randomBytes(4*testPartSize, 14)))
	if err == nil || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("got %v, want the injected failure", err)
	}
	// Part 1 succeeded and its buffer is cached; part 2's buffer, which the
	// transport may still hold after a failure, must not be.
	if got := s.bufs.cached(); got != 1 {
		t.Errorf("%d buffers cached after the failed upload, want 1 (the successful part's)", got)
	}
	assertAbsent(t, s, "k")
	assertNoUploads(t, s, "k")
}

// serverStoppingReader stops srv after n bytes, then keeps producing.
type serverStoppingReader struct {
	t    *testing.T
	srv  *miniotest.Server
	r    io.Reader
	left int
	once sync.Once
}

func (s *serverStoppingReader) Read(p []byte) (int, error) {
	if s.left <= 0 {
		// The reader runs on the goroutine that called Put, the test's.
		s.once.Do(func() { s.srv.Stop(s.t) })
		return s.r.Read(p)
	}
	n, err := s.r.Read(p[:min(len(p), s.left)])
	s.left -= n
	return n, err
}

func TestServerStoppedMidUploadLeavesNoObjectAndSweepRemovesUpload(t *testing.T) {
	ctx := context.Background()
	srv := miniotest.Start(t)
	s := newStore(t, srv, func(o *Options) { o.MaxAttempts = 2 })
	size := 6 * testPartSize
	r := &serverStoppingReader{t: t, srv: srv, r: bytes.NewReader(randomBytes(size, 7)), left: 3 * testPartSize}
	putErr := s.Put(ctx, "big", r)
	if putErr == nil {
		t.Fatal("put succeeded with the server stopped")
	}
	t.Logf("put failed as expected: %v", putErr)
	srv.Restart(t)

	assertAbsent(t, s, "big")
	// The abort failed while the server was down, so the upload is still
	// pending. (After a restart MinIO lists it only under its exact key;
	// see uploads.)
	if !strings.Contains(putErr.Error(), "abort of upload") {
		t.Fatalf("put error does not report the failed abort: %v", putErr)
	}
	pending, err := s.IncompleteUploads(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 1 {
		t.Fatalf("pending uploads = %q, want the one of the failed put", pending)
	}
	// Another process (a fresh Store) finds the upload only by listing,
	// and keeps it while it is younger than the grace period.
	fresh := newStore(t, srv, nil)
	if n, err := fresh.AbortIncompleteUploads(ctx, "big", time.Hour); err != nil || n != 0 {
		t.Fatalf("fresh AbortIncompleteUploads(1h) = %d, %v; want 0 aborted", n, err)
	}
	// The Store whose abort failed remembers the upload and aborts it by
	// key and id, whatever its age and even where listing by prefix
	// finds nothing (MinIO after a restart).
	n, err := s.AbortIncompleteUploads(ctx, "", time.Hour)
	if err != nil || n != 1 {
		t.Fatalf("AbortIncompleteUploads(\"\", 1h) = %d, %v; want its own failed upload aborted", n, err)
	}
	if pending, err := s.IncompleteUploads(ctx, "big"); err != nil || len(pending) != 0 {
		t.Errorf("after the sweep: pending %q, %v", pending, err)
	}
	assertAbsent(t, s, "big")
}

func TestAbortIncompleteUploadsUnderPrefix(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, miniotest.Shared(t), func(o *Options) { o.Prefix = "job" })
	for _, k := range []string{"job/a/1", "job/b/2", "other/3"} {
		if _, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &s.bucket, Key: aws.String(k)}); err != nil {
			t.Fatal(err)
		}
	}
	keys, err := s.IncompleteUploads(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	if want := []string{"a/1", "b/2"}; !slices.Equal(keys, want) {
		t.Fatalf("IncompleteUploads = %q, want %q (only the store's, relative to its prefix)", keys, want)
	}
	n, err := s.AbortIncompleteUploads(ctx, "a/", 0)
	if err != nil || n != 1 {
		t.Fatalf("AbortIncompleteUploads(a/) = %d, %v; want 1", n, err)
	}
	keys, _ = s.IncompleteUploads(ctx, "")
	if want := []string{"b/2"}; !slices.Equal(keys, want) {
		t.Fatalf("after sweep of a/: %q, want %q", keys, want)
	}
}
