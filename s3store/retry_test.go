package s3store

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/integration/faultproxy"
	"github.com/tidemark-io/tidemark/integration/miniotest"
)

// dropFirstConditionalSuccess lets the first successful conditional write
// (PutObject or CompleteMultipartUpload with If-None-Match or If-Match)
// land on the server, then loses its response, as a connection reset
// would: the SDK retries the request, and the retry meets the object the
// first attempt wrote.
type dropFirstConditionalSuccess struct {
	base    http.RoundTripper
	dropped atomic.Int32
}

func (d *dropFirstConditionalSuccess) RoundTrip(req *http.Request) (*http.Response, error) {
	conditional := req.Header.Get("If-None-Match") != "" || req.Header.Get("If-Match") != ""
	resp, err := d.base.RoundTrip(req)
	if err != nil || !conditional || resp.StatusCode/100 != 2 || !d.dropped.CompareAndSwap(0, 1) {
		return resp, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return nil, errors.New("read: connection reset by peer (injected after the write landed)")
}

func TestRetriedConditionalWriteRecognisesItsOwnSuccess(t *testing.T) {
	srv := miniotest.Shared(t)
	for _, sz := range putSizes {
		for _, op := range []string{"PutIfAbsent", "PutIfMatch"} {
			t.Run(sz.name+"/"+op, func(t *testing.T) {
				ctx := context.Background()
				drop := &dropFirstConditionalSuccess{base: http.DefaultTransport}
				s := newStore(t, srv, func(o *Options) { o.HTTPClient = &http.Client{Transport: drop} })
				data := randomBytes(sz.size, 8)
				var etag string
				var err error
				if op == "PutIfAbsent" {
					etag, err = s.PutIfAbsent(ctx, "k", stream(data))
				} else {
					drop.dropped.Store(1) // let the first version through
					old, perr := s.PutIfAbsent(ctx, "k", stream([]byte("old")))
					if perr != nil {
						t.Fatal(perr)
					}
					drop.dropped.Store(0)
					etag, err = s.PutIfMatch(ctx, "k", old, stream(data))
				}
				if err != nil {
					t.Fatalf("%s whose first response was lost: %v", op, err)
				}
				if drop.dropped.Load() != 1 {
					t.Fatal("no response was dropped: the retry path was not exercised")
				}
				info, err := s.Stat(ctx, "k")
				if err != nil {
					t.Fatal(err)
				}
				if info.ETag != etag {
					t.Errorf("returned etag %q, stored %q", etag, info.ETag)
				}
				if got := readAll(t, s, "k"); !bytes.Equal(got, data) {
					t.Error("stored content differs")
				}
				assertNoUploads(t, s, "k")
			})
		}
	}
}

func TestConditionalWriteAgainstAnotherWritersObjectStillFails(t *testing.T) {
	// The write id must make a writer recognise only its own object.
	ctx := context.Background()
	s := newStore(t, miniotest.Shared(t), nil)
	if _, err := s.PutIfAbsent(ctx, "k", stream([]byte("first"))); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutIfAbsent(ctx, "k", stream([]byte("second"))); !errors.Is(err, blobstore.ErrPreconditionFailed) {
		t.Fatalf("second PutIfAbsent: got %v, want ErrPreconditionFailed", err)
	}
	if got := string(readAll(t, s, "k")); got != "first" {
		t.Fatalf("content %q, want %q", got, "first")
	}
}

// failHeads fails every HEAD request that reaches it, as a connection
// that breaks right after a write would, and counts them.
type failHeads struct {
	base  http.RoundTripper
	heads atomic.Int32
}

func (f *failHeads) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodHead {
		f.heads.Add(1)
		return nil, errors.New("injected: connection refused on HEAD")
	}
	return f.base.RoundTrip(req)
}

func TestConditionalWriteThatCannotCheckItsOwnSuccessIsNotAFailedCondition(t *testing.T) {
	// The first attempt lands and its response is lost; the retry gets
	// 412; the object cannot be read to see whose it is. The write may
	// have succeeded, so ErrPreconditionFailed (a definite "you lost")
	// would be a lie that makes a winner believe it was fenced.
	ctx := context.Background()
	heads := &failHeads{base: &dropFirstConditionalSuccess{base: http.DefaultTransport}}
	s := newStore(t, miniotest.Shared(t), func(o *Options) {
		o.MaxAttempts = 2
		o.HTTPClient = &http.Client{Transport: heads}
	})
	_, err := s.PutIfAbsent(ctx, "k", stream([]byte("mine")))
	if err == nil {
		t.Fatal("PutIfAbsent succeeded without being able to check the stored object")
	}
	if errors.Is(err, blobstore.ErrPreconditionFailed) {
		t.Fatalf("got %v; want an error that is not ErrPreconditionFailed (the outcome is unknown)", err)
	}
	if heads.heads.Load() == 0 {
		t.Fatal("no HEAD was attempted: the own-write check was not exercised")
	}
	if got := string(readAll(t, s, "k")); got != "mine" {
		t.Fatalf("stored %q, want the write that landed", got)
	}
}

func TestConditionalWriteWhoseReaderFailsSendsNoHead(t *testing.T) {
	// A reader's own error is no lost request: nothing can have landed,
	// so there is nothing to look up.
	heads := &failHeads{base: http.DefaultTransport}
	s := newStore(t, miniotest.Shared(t), func(o *Options) { o.HTTPClient = &http.Client{Transport: heads} })
	r := io.MultiReader(bytes.NewReader(randomBytes(2*testPartSize, 21)), iotestErrReader{})
	_, err := s.PutIfAbsent(context.Background(), "k", onlyReader{r})
	if !errors.Is(err, errInjectedRead) {
		t.Fatalf("got %v, want the reader's error", err)
	}
	if n := heads.heads.Load(); n != 0 {
		t.Fatalf("%d HEAD requests after a reader failure, want 0", n)
	}
}

var errInjectedRead = errors.New("injected: reader failed")

type iotestErrReader struct{}

func (iotestErrReader) Read([]byte) (int, error) { return 0, errInjectedRead }

func TestRetryBudgetRidesThroughAnOutage(t *testing.T) {
	// Finding 5: the default budget (5 attempts, about 1-2 s) made a job
	// exit at a MinIO restart of a few seconds. With no attempt limit the
	// operation timeout is the budget: an outage shorter than it is
	// ridden through; one longer fails with an error that says so.
	srv := miniotest.Shared(t)
	p := faultproxy.New(t, srv.Endpoint)
	ctx := t.Context()
	t.Run("outage shorter than the budget", func(t *testing.T) {
		s := newStore(t, srv, func(o *Options) {
			o.Endpoint = p.URL()
			o.MaxAttempts = -1
			o.MaxBackoff = 500 * time.Millisecond
			o.OperationTimeout = 30 * time.Second
		})
		p.Refuse(true)
		p.ResetAll()
		time.AfterFunc(3*time.Second, func() { p.Refuse(false) })
		before := p.Stats()
		if err := s.Put(ctx, "k", strings.NewReader("v")); err != nil {
			t.Fatalf("put across a 3 s outage: %v", err)
		}
		if p.Stats().Refused == before.Refused {
			t.Fatal("no connection was refused: the outage was not exercised")
		}
		if got := string(readAll(t, s, "k")); got != "v" {
			t.Fatalf("stored %q", got)
		}
	})
	t.Run("outage longer than the budget", func(t *testing.T) {
		// A port that was free a moment ago: every dial is refused.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		dead := "http://" + l.Addr().String()
		l.Close()
		s := newStore(t, srv, func(o *Options) {
			o.Endpoint = dead
			o.MaxAttempts = -1
			o.MaxBackoff = 200 * time.Millisecond
			o.OperationTimeout = time.Second
		})
		err = s.Put(ctx, "k", strings.NewReader("v"))
		if !errors.Is(err, ErrTimeout) || !errors.Is(err, ErrUnreachable) {
			t.Fatalf("got %v, want ErrTimeout and ErrUnreachable", err)
		}
	})
}
