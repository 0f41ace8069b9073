package integration

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
	"github.com/tidemark-io/tidemark/integration/miniotest"
	"github.com/tidemark-io/tidemark/s3store"
)

// throttler is an HTTP proxy in front of MinIO that answers 503 SlowDown,
// as S3 does under load, in bursts: for burst out of every period every
// request is refused. With applied set, a write in a burst is first
// forwarded (the server applies it) and only its answer is replaced by
// the 503: the worst case, a success the client is told was refused.
type throttler struct {
	proxy         *httputil.ReverseProxy
	start         time.Time
	burst, period time.Duration
	applied       bool
	url           string
	off           atomic.Bool
	throttled     atomic.Int64
	passed        atomic.Int64
}

const slowDownBody = `<?xml version="1.0" encoding="UTF-8"?>
<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message><RequestId>tidemark-throttler</RequestId></Error>`

func (th *throttler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	inBurst := !th.off.Load() && time.Since(th.start)%th.period < th.burst
	if !inBurst {
		th.passed.Add(1)
		th.proxy.ServeHTTP(w, r)
		return
	}
	th.throttled.Add(1)
	if th.applied && r.Method != http.MethodGet && r.Method != http.MethodHead {
		th.proxy.ServeHTTP(httptest.NewRecorder(), r) // applied, answer dropped
	} else {
		_, _ = io.Copy(io.Discard, r.Body)
	}
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("Retry-After", "1")
	w.WriteHeader(http.StatusServiceUnavailable)
	if r.Method != http.MethodHead {
		_, _ = io.WriteString(w, slowDownBody)
	}
}

func startThrottler(t *testing.T, target string, applied bool) *throttler {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	th := &throttler{
		proxy: httputil.NewSingleHostReverseProxy(u),
		start: time.Now(), burst: 400 * time.Millisecond, period: time.Second, applied: applied,
	}
	srv := httptest.NewServer(th)
	t.Cleanup(srv.Close)
	th.url = srv.URL
	return th
}

const rounds = 2

// TestStoreUnderSlowDownBursts runs every kind of write and read through
// bursts of 503 SlowDown: each must succeed after backing off, or fail
// with an error; a success must leave exactly the object written, and a
// failure nothing visible (or, for a write whose own success was
// answered with a 503, the object it wrote). No incomplete multipart
// upload may stay behind.
func TestStoreUnderSlowDownBursts(t *testing.T) {
	srv := minioServer(t)
	for _, applied := range []bool{false, true} {
		name := "refused"
		if applied {
			name = "applied-then-refused"
		}
		t.Run(name, func(t *testing.T) {
			mt := miniotest.Shared(t)
			th := startThrottler(t, mt.Endpoint, applied)
			s := srv.store(t, "throttled", func(o *s3store.Options) {
				o.Endpoint = th.url
				o.PartSize = s3store.MinPartSize
				o.Concurrency = 2
				o.MaxBackoff = time.Second // bursts last 400 ms; keeps the test short
			})
			ctx := t.Context()
			small := []byte("small object")
			large := blobstoretest.Payload(11, 2*s3store.MinPartSize+1<<20)
			var failures, successes int
			check := func(what, key string, err error, want []byte) {
				t.Helper()
				if err != nil {
					failures++
					t.Logf("%s failed loudly: %v", what, err)
					if !strings.Contains(err.Error(), "SlowDown") && !strings.Contains(err.Error(), "503") &&
						!errors.Is(err, blobstore.ErrPreconditionFailed) && !strings.Contains(err.Error(), "unknown") {
						t.Errorf("%s: the error does not say what happened: %v", what, err)
					}
					return
				}
				successes++
				rc, gerr := s.Get(ctx, key)
				if gerr != nil {
					t.Fatalf("%s succeeded but Get fails: %v", what, gerr)
				}
				got, rerr := io.ReadAll(rc)
				rc.Close()
				if rerr != nil || !bytes.Equal(got, want) {
					t.Fatalf("%s succeeded but the object reads %d bytes (%v), want %d", what, len(got), rerr, len(want))
				}
			}
			for round := range rounds {
				for _, body := range [][]byte{small, large} {
					size := "small"
					if len(body) > len(small) {
						size = "large"
					}
					k := fmt.Sprintf("r%d/%s/", round, size)
					check("Put "+size, k+"put", s.Put(ctx, k+"put", bytes.NewReader(body)), body)
					etag, err := s.PutIfAbsent(ctx, k+"cas", bytes.NewReader(body))
					check("PutIfAbsent "+size, k+"cas", err, body)
					if err == nil {
						next := append([]byte("v2 "), body...)
						_, err = s.PutIfMatch(ctx, k+"cas", etag, bytes.NewReader(next))
						check("PutIfMatch "+size, k+"cas", err, next)
					}
				}
			}
			if th.throttled.Load() == 0 {
				t.Fatal("no request was throttled: the bursts were not exercised")
			}
			if successes == 0 {
				t.Fatal("nothing succeeded under throttling: backoff does not ride through the bursts")
			}
			t.Logf("%d requests throttled, %d passed; %d operations succeeded, %d failed", th.throttled.Load(), th.passed.Load(), successes, failures)
			// Nothing half-done once garbage collection has swept: no
			// multipart upload left pending, checked on the server
			// directly under every key written. (A Create that the server
			// applied and answered with a 503 started an upload whose id
			// nobody learned; the upload record written before Create is
			// what lets the sweep find it.)
			th.off.Store(true)
			if _, err := s.AbortIncompleteUploads(ctx, "", 0); err != nil {
				t.Fatalf("sweep: %v", err)
			}
			if keys, err := s.IncompleteUploads(ctx, ""); err != nil || len(keys) != 0 {
				t.Fatalf("after the sweep IncompleteUploads = %q, %v", keys, err)
			}
			client := mt.S3Client(t)
			for round := range rounds {
				for _, size := range []string{"small", "large"} {
					for _, k := range []string{"put", "cas"} {
						key := fmt.Sprintf("throttled/r%d/%s/%s", round, size, k)
						out, err := client.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(s.Bucket()), Prefix: aws.String(key)})
						if err != nil {
							t.Fatal(err)
						}
						for _, u := range out.Uploads {
							t.Errorf("incomplete multipart upload left under %q: %s", key, aws.ToString(u.UploadId))
						}
					}
				}
			}
		})
	}
}
