package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/integration/faultproxy"
	"github.com/tidemark-io/tidemark/integration/miniotest"
	"github.com/tidemark-io/tidemark/s3store"
)

// These tests put a faultproxy.Proxy between s3store and MinIO and check
// what the store and BlobStorage make of a network that resets, cuts,
// refuses, swallows and delays: the SDK's retries get a request through,
// or the operation fails cleanly and leaves nothing half-done behind.
// What was stored is always checked through a direct client, not through
// the proxy.

// proxiedStore opens bucket on srv through endpoint (a proxy's URL) with
// 5 MiB parts; edit adjusts the options first.
func proxiedStore(t *testing.T, srv *miniotest.Server, bucket, endpoint string, edit func(*s3store.Options)) *s3store.Store {
	t.Helper()
	opts := s3store.Options{
		Bucket: bucket, Endpoint: endpoint, Region: srv.Region, PathStyle: true,
		AccessKey: srv.AccessKey, SecretKey: srv.SecretKey,
		PartSize: s3store.MinPartSize,
	}
	if edit != nil {
		edit(&opts)
	}
	bs, err := s3store.New(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return bs
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return b
}

// readObject returns the content of key in bs.
func readObject(t *testing.T, bs blobstore.Blobstore, key string) []byte {
	t.Helper()
	rc, err := bs.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get(%s): %v", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	return b
}

// noIncompleteUploads fails if MinIO lists a multipart upload of key.
// MinIO matches the listing prefix only against whole keys (see
// s3store/uploads.go), so the exact key is asked for as well as all.
func noIncompleteUploads(t *testing.T, srv *miniotest.Server, bucket, key string) {
	t.Helper()
	client := srv.S3Client(t)
	for _, prefix := range []*string{aws.String(key), nil} {
		out, err := client.ListMultipartUploads(t.Context(), &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket), Prefix: prefix})
		if err != nil {
			t.Fatalf("ListMultipartUploads(%q): %v", aws.ToString(prefix), err)
		}
		for _, u := range out.Uploads {
			t.Errorf("incomplete multipart upload left behind: %s (id %s, started %v)",
				aws.ToString(u.Key), aws.ToString(u.UploadId), aws.ToTime(u.Initiated))
		}
	}
}

// bytesUp and bytesDown pick the bytes the proxy forwarded towards the
// server and back.
func bytesUp(st faultproxy.Stats) int64   { return st.BytesUp }
func bytesDown(st faultproxy.Stats) int64 { return st.BytesDown }

// whenTransferred calls fault once the proxy has forwarded `at` more bytes
// (counted by which, up or down) than it had at the call, for each of the
// offsets in order, until stop is closed. It returns a channel that yields
// what the faults returned, closed when done.
func whenTransferred(p *faultproxy.Proxy, stop <-chan struct{}, which func(faultproxy.Stats) int64, at []int64, fault func() int) <-chan int {
	out := make(chan int, len(at))
	base := which(p.Stats())
	go func() {
		defer close(out)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for _, off := range at {
			for which(p.Stats()) < base+off {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
			}
			out <- fault()
		}
	}()
	return out
}

func TestFaultMultipartPutThroughConnectionResetsIsExactOrLeavesNothing(t *testing.T) {
	srv := miniotest.Shared(t)
	bucket := srv.NewBucket(t)
	p := faultproxy.New(t, srv.Endpoint)
	bs := proxiedStore(t, srv, bucket, p.URL(), nil) // 4 parts of 5 MiB in parallel
	direct := openBucket(t, srv, bucket)
	const key = "faults/multipart-reset.bin"
	data := randomBytes(20 << 20)

	// Reset every connection three times while the parts are on their way.
	stop := make(chan struct{})
	resets := whenTransferred(p, stop, bytesUp, []int64{3 << 20, 9 << 20, 15 << 20}, p.ResetAll)
	start := time.Now()
	err := bs.Put(t.Context(), key, bytes.NewReader(data))
	elapsed := time.Since(start)
	close(stop)
	var hit []int
	for n := range resets {
		hit = append(hit, n)
	}
	t.Logf("Put of 20 MiB in %v with resets of %v connections; proxy %+v; err: %v", elapsed, hit, p.Stats(), err)
	if len(hit) == 0 || hit[0] == 0 {
		t.Fatalf("no connection was reset during the upload (resets %v): the test injected nothing", hit)
	}

	if err == nil {
		if got := readObject(t, direct, key); !bytes.Equal(got, data) {
			t.Errorf("Put succeeded but the object holds %d bytes that differ from the 20 MiB written", len(got))
		}
	} else {
		if ok, xerr := direct.Exists(t.Context(), key); xerr != nil || ok {
			t.Errorf("Put failed (%v) but Exists = %v, %v; want the object absent", err, ok, xerr)
		}
	}
	noIncompleteUploads(t, srv, bucket, key)
}

// armingTransport arms a fault the first time it sends a request that
// match selects, just before sending it: a precise trigger for a fault
// the proxy then injects on the wire. From then on it records every
// request and its outcome, so a test can check what the client did
// after the fault.
type armingTransport struct {
	base  http.RoundTripper
	match func(*http.Request) bool
	arm   func()
	armed atomic.Bool
	mu    sync.Mutex
	log   []string // "METHOD matched|other STATUS|error", from the armed request on
}

func (a *armingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	matched := a.match(r)
	if matched && a.armed.CompareAndSwap(false, true) {
		a.arm()
	}
	resp, err := a.base.RoundTrip(r)
	if a.armed.Load() {
		kind := "other"
		if matched {
			kind = "matched"
		}
		outcome := "error"
		if err == nil {
			outcome = strconv.Itoa(resp.StatusCode)
		}
		a.mu.Lock()
		a.log = append(a.log, r.Method+" "+kind+" "+outcome)
		a.mu.Unlock()
	}
	return resp, err
}

// requests returns the log.
func (a *armingTransport) requests() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.log)
}

// requestKind selects S3 requests by HTTP method and more.
type requestKind struct {
	method string
	match  func(*http.Request) bool
}

func TestFaultConditionalWriteWhoseResponseIsLostRecognisesItsOwnSuccess(t *testing.T) {
	srv := miniotest.Shared(t)
	bucket := srv.NewBucket(t)
	direct := openBucket(t, srv, bucket)
	isPut := requestKind{http.MethodPut, func(r *http.Request) bool { return r.Method == http.MethodPut && !r.URL.Query().Has("uploadId") }}
	isComplete := requestKind{http.MethodPost, func(r *http.Request) bool { return r.Method == http.MethodPost && r.URL.Query().Has("uploadId") }}

	for _, tc := range []struct {
		name  string
		size  int
		match requestKind // the request whose response is lost
		// existing: the object exists beforehand and PutIfMatch replaces it
		existing bool
		// lastAttempt: the lost response is the last attempt's
		// (MaxAttempts 1), so no retry meets the object: the store must
		// read it after the transport error itself.
		lastAttempt bool
	}{
		{"put-if-absent", 1 << 10, isPut, false, false},
		{"put-if-match", 1 << 10, isPut, true, false},
		{"put-if-absent multipart (Complete's response lost)", 6 << 20, isComplete, false, false},
		{"put-if-match multipart (Complete's response lost)", 6 << 20, isComplete, true, false},
		{"put-if-absent, last attempt's response lost", 1 << 10, isPut, false, true},
		{"put-if-match multipart, last attempt's response lost", 6 << 20, isComplete, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			key := "faults/" + strings.NewReplacer(" ", "-", "(", "", ")", "", "'", "").Replace(tc.name)
			p := faultproxy.New(t, srv.Endpoint)
			// The response is lost after the server has handled the
			// request: the proxy lets the request through and resets the
			// connection when MinIO starts answering.
			tr := &armingTransport{
				base: http.DefaultTransport.(*http.Transport).Clone(), match: tc.match.match,
				arm: func() { p.CutResponseAfter(1) },
			}
			bs := proxiedStore(t, srv, bucket, p.URL(), func(o *s3store.Options) {
				o.HTTPClient = &http.Client{Transport: tr}
				o.Concurrency = 1
				if tc.lastAttempt {
					o.MaxAttempts = 1
				}
			})
			var oldETag string
			if tc.existing {
				var err error
				if oldETag, err = direct.PutIfAbsent(ctx, key, strings.NewReader("previous")); err != nil {
					t.Fatal(err)
				}
			}
			data := randomBytes(tc.size)

			var etag string
			var err error
			if tc.existing {
				etag, err = bs.PutIfMatch(ctx, key, oldETag, bytes.NewReader(data))
			} else {
				etag, err = bs.PutIfAbsent(ctx, key, bytes.NewReader(data))
			}
			st, reqs := p.Stats(), tr.requests()
			t.Logf("proxy %+v; requests from the lost one on: %q", st, reqs)
			if st.LostResponses != 1 || len(reqs) == 0 || reqs[0] != tc.match.method+" matched error" {
				t.Fatalf("the fault was not injected: LostResponses = %d, requests %q", st.LostResponses, reqs)
			}
			// The retry met the object its first attempt wrote (412, or
			// 404 NoSuchUpload for a Complete), or there was no retry
			// (lastAttempt), and the store read the object's write id
			// (HEAD): the own-success path ran, not a plain second write.
			if !tc.lastAttempt && !slices.Contains(reqs, tc.match.method+" matched 412") && !slices.Contains(reqs, tc.match.method+" matched 404") {
				t.Errorf("no retry of the request met its own success (412 or 404): %q", reqs)
			}
			if !slices.Contains(reqs, "HEAD other 200") {
				t.Errorf("the store never read the object's write id (HEAD): %q", reqs)
			}
			if err != nil {
				t.Fatalf("the write whose response was lost failed: %v (ErrPreconditionFailed: %v)",
					err, errors.Is(err, blobstore.ErrPreconditionFailed))
			}
			info, serr := direct.Stat(ctx, key)
			if serr != nil {
				t.Fatal(serr)
			}
			if etag != info.ETag {
				t.Errorf("returned ETag %q, stored object's ETag %q", etag, info.ETag)
			}
			if got := readObject(t, direct, key); !bytes.Equal(got, data) {
				t.Errorf("the object holds %d bytes that are not ours", len(got))
			}
			noIncompleteUploads(t, srv, bucket, key)
		})
	}
}

func TestFaultConditionalWriteCutMidRequestIsRetriedWhole(t *testing.T) {
	ctx := t.Context()
	srv := miniotest.Shared(t)
	bucket := srv.NewBucket(t)
	direct := openBucket(t, srv, bucket)
	p := faultproxy.New(t, srv.Endpoint)
	// The request is cut half-way through its body: MinIO never gets it
	// whole, so nothing is written and the SDK's retry writes it afresh.
	tr := &armingTransport{
		base:  http.DefaultTransport.(*http.Transport).Clone(),
		match: func(r *http.Request) bool { return r.Method == http.MethodPut },
		arm:   func() { p.CutAfter(512 << 10) },
	}
	bs := proxiedStore(t, srv, bucket, p.URL(), func(o *s3store.Options) { o.HTTPClient = &http.Client{Transport: tr} })
	const key = "faults/cut-mid-request.bin"
	data := randomBytes(1 << 20) // one PutObject, sent without Expect: 100-continue
	etag, err := bs.PutIfAbsent(ctx, key, bytes.NewReader(data))
	st, reqs := p.Stats(), tr.requests()
	t.Logf("proxy %+v; requests from the cut one on: %q", st, reqs)
	if st.Cuts != 1 {
		t.Fatalf("Cuts = %d, want 1: the fault was not injected", st.Cuts)
	}
	if err != nil {
		t.Fatalf("PutIfAbsent cut mid-request: %v", err)
	}
	if want := []string{"PUT matched error", "PUT matched 200"}; !slices.Equal(reqs, want) {
		t.Errorf("requests %q, want %q: the cut request must not have been applied", reqs, want)
	}
	info, err := direct.Stat(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if info.ETag != etag || !bytes.Equal(readObject(t, direct, key), data) {
		t.Errorf("stored object (ETag %q, returned %q) does not hold the bytes written", info.ETag, etag)
	}
}

func TestFaultBlackholedGetReturnsDeadlineErrorPromptlyWithoutLeaks(t *testing.T) {
	srv := miniotest.Shared(t)
	bucket := srv.NewBucket(t)
	p := faultproxy.New(t, srv.Endpoint)
	bs := proxiedStore(t, srv, bucket, p.URL(), nil)
	const key = "faults/blackhole.bin"
	data := randomBytes(256 << 10)
	if err := bs.Put(t.Context(), key, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	// A first Get opens the connection the blackholed one will reuse, so
	// that the goroutine count below includes it.
	if got := readObject(t, bs, key); !bytes.Equal(got, data) {
		t.Fatal("Get through the proxy returned other bytes")
	}
	before := runtime.NumGoroutine()

	p.Blackhole(true)
	const deadline = 500 * time.Millisecond
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	start := time.Now()
	rc, err := bs.Get(ctx, key)
	elapsed := time.Since(start)
	cancel()
	if err == nil {
		rc.Close()
		t.Fatal("Get through a black hole succeeded")
	}
	t.Logf("Get through the black hole: %v after %v", err, elapsed)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v does not wrap context.DeadlineExceeded", err)
	}
	if elapsed > deadline+time.Second {
		t.Errorf("Get returned %v after a %v deadline", elapsed, deadline)
	}

	// The client drops the connection it gave up on, and the proxy its
	// goroutines with it: the count settles back.
	settle := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(settle) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		var dump strings.Builder
		_ = pprof.Lookup("goroutine").WriteTo(&dump, 1)
		t.Errorf("%d goroutines 5s after the Get, %d before it:\n%s", n, before, dump.String())
	}

	p.Blackhole(false)
	if got := readObject(t, bs, key); !bytes.Equal(got, data) {
		t.Error("Get after the black hole was lifted returned other bytes")
	}
}

func TestFaultSaveThroughRefusingProxyFailsKeepsPreviousCheckpointAndRetrySucceeds(t *testing.T) {
	ctx := t.Context()
	srv := miniotest.Shared(t)
	bucket := srv.NewBucket(t)
	p := faultproxy.New(t, srv.Endpoint)
	bs := proxiedStore(t, srv, bucket, p.URL(), func(o *s3store.Options) {
		o.Concurrency = 2
		o.MaxAttempts = 2 // fail fast while the proxy refuses
	})
	direct := openBucket(t, srv, bucket)
	// Grace of a nanosecond: GC aborts every incomplete upload it finds.
	w := acquiredWriter(t, bs, blobstorage.Options{Grace: time.Nanosecond})

	id1, id2 := checkpoint.NewID(1), checkpoint.NewID(2)
	if err := w.Save(ctx, completedRecord(id1, writeState(t, w.StateDir(id1)))); err != nil {
		t.Fatalf("Save(%s): %v", id1, err)
	}
	// writeState's op-0/000001.sst is 12 MiB: a multipart upload.
	d2 := completedRecord(id2, writeState(t, w.StateDir(id2)))
	bigKey := fmt.Sprintf("shared/op-0/%s-e%d/000001.sst", id2, w.Epoch())

	// Midway through the second Save's uploads the server "goes down":
	// new connections are refused and open ones reset.
	stop := make(chan struct{})
	down := whenTransferred(p, stop, bytesUp, []int64{4 << 20}, func() int {
		p.Refuse(true)
		return p.ResetAll()
	})
	start := time.Now()
	err := w.Save(ctx, d2)
	close(stop)
	if _, fired := <-down; !fired {
		t.Fatalf("Save(%s) ended (%v) before 4 MiB went through the proxy: nothing was refused", id2, err)
	}
	t.Logf("Save with the proxy refusing: %v after %v; proxy %+v", err, time.Since(start), p.Stats())
	if err == nil {
		t.Fatalf("Save(%s) succeeded while the proxy refused every connection", id2)
	}
	if st := p.Stats(); st.Refused == 0 {
		t.Errorf("the proxy refused no connection (%+v): the Save failed for another reason", st)
	}

	// The previous checkpoint is intact, seen directly.
	if got := latestCompletedID(t, direct); got != id1 {
		t.Fatalf("after the failed Save, latest completed = %q, want %s", got, id1)
	}
	sameTree(t, w.StateDir(id1), restoreOnEmptyNode(t, direct, id1))

	// The server is back: the same Save goes through.
	p.Refuse(false)
	start = time.Now()
	if err := w.Save(ctx, d2); err != nil {
		t.Fatalf("Save(%s) after the proxy recovered: %v", id2, err)
	}
	t.Logf("retried Save in %v", time.Since(start))
	if got := latestCompletedID(t, direct); got != id2 {
		t.Fatalf("after the retried Save, latest completed = %q, want %s", got, id2)
	}
	sameTree(t, w.StateDir(id2), restoreOnEmptyNode(t, direct, id2))

	// The upload the refused abort left behind is GC's to remove.
	rep, err := w.GC(ctx, blobstorage.GCOptions{Now: time.Now().Add(2 * time.Hour)})
	if err != nil {
		t.Fatalf("GC: %v", err)
	}
	t.Logf("GC: %+v", rep)
	noIncompleteUploads(t, srv, bucket, bigKey)
}

func TestFaultLatencyKeepsPutAndGetCorrect(t *testing.T) {
	ctx := t.Context()
	srv := miniotest.Shared(t)
	bucket := srv.NewBucket(t)
	p := faultproxy.New(t, srv.Endpoint)
	const latency = 50 * time.Millisecond
	p.SetLatency(latency)
	bs := proxiedStore(t, srv, bucket, p.URL(), nil)
	direct := openBucket(t, srv, bucket)

	for _, size := range []int{0, 1 << 10, 12 << 20} { // 12 MiB: three parts
		key := fmt.Sprintf("faults/latency-%d.bin", size)
		data := randomBytes(size)
		start := time.Now()
		if err := bs.Put(ctx, key, bytes.NewReader(data)); err != nil {
			t.Fatalf("Put(%s): %v", key, err)
		}
		put := time.Since(start)
		start = time.Now()
		got := readObject(t, bs, key)
		get := time.Since(start)
		t.Logf("%d bytes: Put %v, Get %v", size, put, get)
		if !bytes.Equal(got, data) {
			t.Errorf("%s: Get through the proxy returned %d bytes that differ from the %d written", key, len(got), size)
		}
		if !bytes.Equal(readObject(t, direct, key), data) {
			t.Errorf("%s: the stored object differs from what was written", key)
		}
		// A request and its answer each wait the latency.
		if get < 2*latency {
			t.Errorf("%s: Get took %v, less than the round trip of %v: the latency was not applied", key, get, 2*latency)
		}
	}
	// A ranged read crosses the proxy too.
	rc, err := bs.GetRange(ctx, "faults/latency-12582912.bin", 5<<20-10, 20)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	part, err := io.ReadAll(rc)
	if err != nil || len(part) != 20 {
		t.Fatalf("GetRange: %d bytes, %v", len(part), err)
	}
	if want := readObject(t, direct, "faults/latency-12582912.bin")[5<<20-10 : 5<<20+10]; !bytes.Equal(part, want) {
		t.Error("GetRange through the proxy returned other bytes")
	}
}

// TestFaultRestoreResumesAfterConnectionResetsMidBody: the SDK retries a
// request only until its response headers arrive, so a reset while a
// large state file streams back would fail the whole restore. Restore
// resumes the object from the byte it reached, and the digest check
// proves the pieces fit.
func TestFaultRestoreResumesAfterConnectionResetsMidBody(t *testing.T) {
	ctx := t.Context()
	srv := miniotest.Shared(t)
	bucket := srv.NewBucket(t)
	direct := openBucket(t, srv, bucket)
	w := acquiredWriter(t, direct, blobstorage.Options{})
	id := checkpoint.NewID(1)
	// writeState's op-0/000001.sst is 12 MiB.
	if err := w.Save(ctx, completedRecord(id, writeState(t, w.StateDir(id)))); err != nil {
		t.Fatal(err)
	}

	p := faultproxy.New(t, srv.Endpoint)
	p.SetLatency(10 * time.Millisecond) // long enough a stream to reset mid-body
	bs := proxiedStore(t, srv, bucket, p.URL(), nil)
	node := blobstorage.New(bs, t.TempDir(), blobstorage.Options{})
	stop := make(chan struct{})
	resets := whenTransferred(p, stop, bytesDown, []int64{3 << 20, 7 << 20}, p.ResetAll)
	err := node.Restore(ctx, id)
	close(stop)
	fired := 0
	for n := range resets {
		fired += n
	}
	t.Logf("proxy %+v; connections reset: %d", p.Stats(), fired)
	if fired == 0 {
		t.Fatal("no connection was reset mid-download: the fault was not injected")
	}
	if err != nil {
		t.Fatalf("Restore through connection resets mid-body: %v", err)
	}
	sameTree(t, w.StateDir(id), node.StateDir(id))
}
