package s3store

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/tidemark-io/tidemark/blobstore"
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
