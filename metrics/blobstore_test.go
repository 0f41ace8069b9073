package metrics

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
	"github.com/tidemark-io/tidemark/blobstore/memstore"
)

const (
	opsTotal    = "tidemark_objstore_operations_total"
	failsTotal  = "tidemark_objstore_operation_failures_total"
	durationSec = "tidemark_objstore_operation_duration_seconds"
	bytesTotal  = "tidemark_objstore_operation_transferred_bytes_total"
)

func newBlobstoreMetrics(t *testing.T, opts BlobstoreOptions) (*BlobstoreMetrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	m, err := NewBlobstoreMetrics(reg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return m, reg
}

func op(o blobstore.Op) string { return `operation="` + string(o) + `"` }

// Every operation has its series from the start, at 0, so that rate() and
// alerts see them before the first operation; only operations that move
// a body have a bytes series.
func TestBlobstoreSeriesExistAtZero(t *testing.T) {
	_, reg := newBlobstoreMetrics(t, BlobstoreOptions{})
	f := gather(t, reg)
	for _, name := range []string{opsTotal, failsTotal, durationSec, bytesTotal} {
		if _, ok := f[name]; !ok {
			t.Errorf("family %s is missing", name)
		}
	}
	if len(f) != 4 {
		t.Errorf("gathered %d families, want 4: %v", len(f), f)
	}
	for _, o := range blobstore.Ops {
		if v := f.value(t, opsTotal, counter, op(o)); v != 0 {
			t.Errorf("%s{%s} = %v, want 0", opsTotal, op(o), v)
		}
		if v := f.value(t, failsTotal, counter, op(o)); v != 0 {
			t.Errorf("%s{%s} = %v, want 0", failsTotal, op(o), v)
		}
		if s := f.get(t, durationSec, histogram, op(o)); s.count != 0 {
			t.Errorf("%s{%s} count = %d, want 0", durationSec, op(o), s.count)
		}
	}
	wantBytes := []blobstore.Op{blobstore.OpPut, blobstore.OpPutIfAbsent, blobstore.OpPutIfMatch, blobstore.OpGet, blobstore.OpGetRange}
	if got := keys(f[bytesTotal]); len(got) != len(wantBytes) {
		t.Errorf("%s series = %v, want one per body-moving operation %v", bytesTotal, got, wantBytes)
	}
	for _, o := range wantBytes {
		f.get(t, bytesTotal, counter, op(o))
	}
}

// Driving every operation of an observed memstore, including expected
// answers (a missing key, a failed condition), counts each once, records
// its duration, and counts the bytes of every body.
func TestBlobstoreCountsEveryOperation(t *testing.T) {
	ctx := t.Context()
	m, reg := newBlobstoreMetrics(t, BlobstoreOptions{})
	bs := m.Wrap(memstore.New())

	if err := bs.Put(ctx, "a", strings.NewReader("hello")); err != nil { // 5 bytes
		t.Fatal(err)
	}
	etag, err := bs.PutIfAbsent(ctx, "b", strings.NewReader("abc")) // 3 bytes
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bs.PutIfAbsent(ctx, "b", strings.NewReader("xy")); !errors.Is(err, blobstore.ErrPreconditionFailed) {
		t.Fatalf("second PutIfAbsent: %v, want ErrPreconditionFailed", err)
	}
	if _, err := bs.PutIfMatch(ctx, "b", etag, strings.NewReader("abcd")); err != nil { // 4 bytes
		t.Fatal(err)
	}
	if err := readAll(bs.Get(ctx, "a")); err != nil { // 5 bytes
		t.Fatal(err)
	}
	if _, err := bs.Get(ctx, "missing"); !errors.Is(err, blobstore.ErrNotFound) {
		t.Fatalf("Get missing: %v, want ErrNotFound", err)
	}
	if err := readAll(bs.GetRange(ctx, "a", 1, 3)); err != nil { // 3 bytes
		t.Fatal(err)
	}
	if _, err := bs.Stat(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := bs.Stat(ctx, "missing"); !errors.Is(err, blobstore.ErrNotFound) {
		t.Fatalf("Stat missing: %v, want ErrNotFound", err)
	}
	if ok, err := bs.Exists(ctx, "a"); err != nil || !ok {
		t.Fatalf("Exists = %v, %v", ok, err)
	}
	if got := blobstoretest.ListKeys(t, bs, ""); len(got) != 2 {
		t.Fatalf("List = %v, want 2 keys", got)
	}
	if err := bs.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}

	f := gather(t, reg)
	want := map[blobstore.Op]struct {
		ops   float64
		bytes float64 // -1: no bytes series
	}{
		blobstore.OpPut:         {1, 5},
		blobstore.OpPutIfAbsent: {2, 5}, // the refused one's 2 bytes were read too
		blobstore.OpPutIfMatch:  {1, 4},
		blobstore.OpGet:         {2, 5},
		blobstore.OpGetRange:    {1, 3},
		blobstore.OpStat:        {2, -1},
		blobstore.OpExists:      {1, -1},
		blobstore.OpList:        {1, -1},
		blobstore.OpDelete:      {1, -1},
	}
	for o, w := range want {
		if v := f.value(t, opsTotal, counter, op(o)); v != w.ops {
			t.Errorf("%s{%s} = %v, want %v", opsTotal, op(o), v, w.ops)
		}
		if v := f.value(t, failsTotal, counter, op(o)); v != 0 {
			t.Errorf("%s{%s} = %v, want 0: expected answers are not failures", failsTotal, op(o), v)
		}
		if s := f.get(t, durationSec, histogram, op(o)); s.count != uint64(w.ops) {
			t.Errorf("%s{%s} count = %d, want %v (every operation that did not fail)", durationSec, op(o), s.count, w.ops)
		}
		if w.bytes >= 0 {
			if v := f.value(t, bytesTotal, counter, op(o)); v != w.bytes {
				t.Errorf("%s{%s} = %v, want %v", bytesTotal, op(o), v, w.bytes)
			}
		}
	}
}

// readAll reads a body to its end and closes it.
func readAll(rc io.ReadCloser, err error) error {
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, rc)
	return errors.Join(err, rc.Close())
}

// failing returns a store whose writes fail after reading 2 bytes and
// whose reads break after 3, as a store behind a broken network does.
func failing(t *testing.T, err error) blobstore.Blobstore {
	base := memstore.New()
	if e := base.Put(t.Context(), "a", strings.NewReader("partial")); e != nil {
		t.Fatal(e)
	}
	return blobstoretest.Intercept(base, blobstoretest.Hooks{
		Before: func(_ context.Context, c *blobstoretest.Call) error {
			switch c.Op {
			case blobstore.OpPut:
				if _, e := io.CopyN(io.Discard, c.Body, 2); e != nil {
					return e
				}
				return err
			case blobstore.OpDelete:
				return err
			}
			return nil
		},
		Read: func(_ *blobstoretest.Call, r io.Reader) io.Reader {
			return io.MultiReader(io.LimitReader(r, 3), errReader{err})
		},
	})
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// A failed operation counts as a failure and records no duration; the
// bytes it moved before failing are counted all the same.
func TestBlobstoreCountsFailures(t *testing.T) {
	ctx := t.Context()
	m, reg := newBlobstoreMetrics(t, BlobstoreOptions{})
	boom := errors.New("connection reset")
	bs := m.Wrap(failing(t, boom))

	if err := bs.Put(ctx, "a", strings.NewReader("hello")); !errors.Is(err, boom) {
		t.Fatalf("Put: %v", err)
	}
	rc, err := bs.Get(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, rc); !errors.Is(err, boom) {
		t.Fatalf("reading the body: %v", err)
	}
	rc.Close()
	if err := bs.Delete(ctx, "a"); !errors.Is(err, boom) {
		t.Fatalf("Delete: %v", err)
	}

	f := gather(t, reg)
	for _, o := range []blobstore.Op{blobstore.OpPut, blobstore.OpGet, blobstore.OpDelete} {
		if v := f.value(t, opsTotal, counter, op(o)); v != 1 {
			t.Errorf("%s{%s} = %v, want 1", opsTotal, op(o), v)
		}
		if v := f.value(t, failsTotal, counter, op(o)); v != 1 {
			t.Errorf("%s{%s} = %v, want 1", failsTotal, op(o), v)
		}
		if s := f.get(t, durationSec, histogram, op(o)); s.count != 0 {
			t.Errorf("%s{%s} count = %d, want 0 for a failed operation", durationSec, op(o), s.count)
		}
	}
	if v := f.value(t, bytesTotal, counter, op(blobstore.OpPut)); v != 2 {
		t.Errorf("put bytes = %v, want the 2 read before failing", v)
	}
	if v := f.value(t, bytesTotal, counter, op(blobstore.OpGet)); v != 3 {
		t.Errorf("get bytes = %v, want the 3 read before failing", v)
	}
}

// Which errors are failures: thanos objstore's rule, with our sentinels.
func TestBlobstoreWhatIsAFailure(t *testing.T) {
	tests := []struct {
		err      error
		failure  bool
		duration bool
	}{
		{nil, false, true},
		{fmt.Errorf("get k: %w", blobstore.ErrNotFound), false, true},
		{fmt.Errorf("put k: %w", blobstore.ErrPreconditionFailed), false, true},
		{fmt.Errorf("get k: %w", context.Canceled), false, false},
		{fmt.Errorf("get k: %w", context.DeadlineExceeded), true, false},
		{errors.New("503 slow down"), true, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.err), func(t *testing.T) {
			m, reg := newBlobstoreMetrics(t, BlobstoreOptions{})
			m.Done(blobstore.OpGet, "k", 0, 250*time.Millisecond, tt.err)
			f := gather(t, reg)
			if v := f.value(t, opsTotal, counter, op(blobstore.OpGet)); v != 1 {
				t.Errorf("operations = %v, want 1", v)
			}
			if got := f.value(t, failsTotal, counter, op(blobstore.OpGet)) == 1; got != tt.failure {
				t.Errorf("failure counted = %v, want %v", got, tt.failure)
			}
			s := f.get(t, durationSec, histogram, op(blobstore.OpGet))
			if got := s.count == 1; got != tt.duration {
				t.Errorf("duration recorded = %v, want %v", got, tt.duration)
			}
			if tt.duration && s.sum != 0.25 {
				t.Errorf("duration sum = %v, want 0.25", s.sum)
			}
		})
	}
}

// With a key classifier, every family is labelled by key_class too; every
// listed class (and "other") has its series at 0, and a class the
// classifier was not declared to return is counted as "other".
func TestBlobstoreKeyClasses(t *testing.T) {
	ctx := t.Context()
	classify := func(key string) string {
		switch {
		case strings.HasPrefix(key, "shared/"):
			return "shared"
		case strings.HasPrefix(key, "checkpoints/"):
			return "record"
		case strings.HasPrefix(key, "_"):
			return "pointer"
		case strings.HasPrefix(key, "tmp/"):
			return "undeclared"
		}
		return ""
	}
	m, reg := newBlobstoreMetrics(t, BlobstoreOptions{KeyClass: classify, KeyClasses: []string{"shared", "record", "pointer"}})

	f := gather(t, reg)
	for _, c := range []string{"shared", "record", "pointer", OtherKeyClass} {
		for _, o := range blobstore.Ops {
			l := `key_class="` + c + `",` + op(o)
			if v := f.value(t, opsTotal, counter, l); v != 0 {
				t.Errorf("%s{%s} = %v at start", opsTotal, l, v)
			}
			f.get(t, failsTotal, counter, l)
			f.get(t, durationSec, histogram, l)
		}
	}
	if n, want := len(f[opsTotal]), 4*len(blobstore.Ops); n != want {
		t.Errorf("%s has %d series, want %d", opsTotal, n, want)
	}

	bs := m.Wrap(memstore.New())
	for _, k := range []string{"shared/o/1.sst", "shared/o/2.sst", "checkpoints/1/checkpoint.json", "_latest", "tmp/x", "loose"} {
		if err := bs.Put(ctx, k, strings.NewReader("0123456789")); err != nil {
			t.Fatal(err)
		}
	}
	f = gather(t, reg)
	for class, n := range map[string]float64{"shared": 2, "record": 1, "pointer": 1, OtherKeyClass: 2} {
		l := `key_class="` + class + `",` + op(blobstore.OpPut)
		if v := f.value(t, opsTotal, counter, l); v != n {
			t.Errorf("%s{%s} = %v, want %v", opsTotal, l, v, n)
		}
		if v := f.value(t, bytesTotal, counter, l); v != 10*n {
			t.Errorf("%s{%s} = %v, want %v", bytesTotal, l, v, 10*n)
		}
	}
	if n, want := len(f[opsTotal]), 4*len(blobstore.Ops); n != want {
		t.Errorf("after operations %s has %d series, want still %d", opsTotal, n, want)
	}
}

func TestBlobstoreOptionsInvalid(t *testing.T) {
	classify := func(string) string { return "x" }
	tests := map[string]BlobstoreOptions{
		"classes without classifier": {KeyClasses: []string{"x"}},
		"classifier without classes": {KeyClass: classify},
		"empty class":                {KeyClass: classify, KeyClasses: []string{"x", ""}},
		"invalid UTF-8 class":        {KeyClass: classify, KeyClasses: []string{"\xff"}},
	}
	for name, opts := range tests {
		t.Run(name, func(t *testing.T) {
			reg := prometheus.NewPedanticRegistry()
			if _, err := NewBlobstoreMetrics(reg, opts); err == nil {
				t.Fatal("NewBlobstoreMetrics accepted invalid options")
			} else {
				t.Log(err)
			}
			if mfs, _ := reg.Gather(); len(mfs) != 0 {
				t.Errorf("a rejected constructor registered %d families", len(mfs))
			}
		})
	}
	// Listing "other" or a class twice is harmless.
	if _, err := NewBlobstoreMetrics(nil, BlobstoreOptions{KeyClass: classify, KeyClasses: []string{"x", "x", OtherKeyClass}}); err != nil {
		t.Errorf("duplicate classes: %v", err)
	}
}

// Registering twice on one registry is an error that says what to do, and
// a constructor that fails half way leaves the registry as it was.
func TestBlobstoreRegisterConflict(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	if _, err := NewBlobstoreMetrics(reg, BlobstoreOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := NewBlobstoreMetrics(reg, BlobstoreOptions{})
	var are prometheus.AlreadyRegisteredError
	if !errors.As(err, &are) || !strings.Contains(err.Error(), "WrapRegistererWith") {
		t.Errorf("second registration: %v; want an AlreadyRegisteredError that names the way out", err)
	}

	// Another registry where only the duration family's name is taken.
	reg = prometheus.NewPedanticRegistry()
	reg.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: durationSec, Help: "taken"}))
	if _, err := NewBlobstoreMetrics(reg, BlobstoreOptions{}); err == nil {
		t.Fatal("registered over a taken name")
	}
	f := gather(t, reg)
	if len(f) != 1 {
		t.Errorf("after a failed registration the registry has %v, want only the gauge that was there", f)
	}

	// Told apart by a label, two instances share one registry.
	reg = prometheus.NewPedanticRegistry()
	for _, store := range []string{"primary", "backup"} {
		if _, err := NewBlobstoreMetrics(prometheus.WrapRegistererWith(prometheus.Labels{"store": store}, reg), BlobstoreOptions{}); err != nil {
			t.Fatalf("store %s: %v", store, err)
		}
	}
	if n := len(gather(t, reg)[opsTotal]); n != 2*len(blobstore.Ops) {
		t.Errorf("two labelled instances: %d series, want %d", n, 2*len(blobstore.Ops))
	}
}

// Counting from many goroutines at once is exact (run with -race).
func TestBlobstoreConcurrent(t *testing.T) {
	ctx := t.Context()
	m, reg := newBlobstoreMetrics(t, BlobstoreOptions{})
	bs := m.Wrap(memstore.New())
	const workers, each = 8, 50
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				key := fmt.Sprintf("w%d/%d", w, i)
				if err := bs.Put(ctx, key, strings.NewReader("0123456789")); err != nil {
					t.Error(err)
					return
				}
				rc, err := bs.Get(ctx, key)
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, rc)
				rc.Close()
			}
		})
	}
	wg.Wait()
	f := gather(t, reg)
	for _, o := range []blobstore.Op{blobstore.OpPut, blobstore.OpGet} {
		if v := f.value(t, opsTotal, counter, op(o)); v != workers*each {
			t.Errorf("%s{%s} = %v, want %d", opsTotal, op(o), v, workers*each)
		}
		if v := f.value(t, bytesTotal, counter, op(o)); v != 10*workers*each {
			t.Errorf("%s{%s} = %v, want %d", bytesTotal, op(o), v, 10*workers*each)
		}
	}
}
