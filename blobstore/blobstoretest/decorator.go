package blobstoretest

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/memstore"
)

// Capable is an in-memory store with every optional capability of
// package blobstore, recording how each was called. RunDecorator wraps one
// to check that a decorator does not hide them.
type Capable struct {
	blobstore.Blobstore
	// ProbeErr is what Probe returns.
	ProbeErr error

	mu       sync.Mutex
	probes   int
	aborted  []string // prefixes AbortIncompleteUploads was called with
	infoGets int      // calls of GetWithInfo
	stats    int      // calls of Stat
}

// NewCapable returns an empty Capable store.
func NewCapable() *Capable { return &Capable{Blobstore: memstore.New()} }

// Probe counts the call and returns ProbeErr.
func (c *Capable) Probe(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.probes++
	return c.ProbeErr
}

// ProbeReport counts the call like Probe and returns ProbeErr, with a
// report of one racing round of two writers when ProbeErr is nil.
func (c *Capable) ProbeReport(ctx context.Context) (blobstore.ProbeReport, error) {
	if err := c.Probe(ctx); err != nil {
		return blobstore.ProbeReport{}, err
	}
	return blobstore.ProbeReport{RaceRounds: 1, RaceWriters: 2}, nil
}

// AbortIncompleteUploads records prefix and aborts nothing.
func (c *Capable) AbortIncompleteUploads(_ context.Context, prefix string, _ time.Duration) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.aborted = append(c.aborted, prefix)
	return 1, nil
}

// GetWithInfo counts the call and reads from the store underneath.
func (c *Capable) GetWithInfo(ctx context.Context, key string) (io.ReadCloser, blobstore.ObjectInfo, error) {
	c.mu.Lock()
	c.infoGets++
	c.mu.Unlock()
	return blobstore.GetWithInfo(ctx, c.Blobstore, key)
}

// Stat counts the call and asks the store underneath.
func (c *Capable) Stat(ctx context.Context, key string) (blobstore.ObjectInfo, error) {
	c.mu.Lock()
	c.stats++
	c.mu.Unlock()
	return c.Blobstore.Stat(ctx, key)
}

// InfoGets and Stats return how many times GetWithInfo and Stat were
// called.
func (c *Capable) InfoGets() (infoGets, stats int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.infoGets, c.stats
}

// Probes returns how many times Probe was called.
func (c *Capable) Probes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.probes
}

// Aborted returns the prefixes AbortIncompleteUploads was called with.
func (c *Capable) Aborted() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.aborted...)
}

// RunDecorator checks a decorator: wrap returns the decorated store and
// the key prefix the decorator adds to every key ("" for none). It runs
// the conformance suite through the decorator (on a memstore) and checks
// that every optional capability of package blobstore is found through it
// with blobstore.As and reaches the store underneath, with keys
// translated.
func RunDecorator(t *testing.T, wrap func(t *testing.T, bs blobstore.Blobstore) (decorated blobstore.Blobstore, keyPrefix string)) {
	t.Run("Conformance", func(t *testing.T) {
		_, keyPrefix := wrap(t, memstore.New())
		Run(t, func(t *testing.T) blobstore.Blobstore {
			d, _ := wrap(t, memstore.New())
			return d
		}, Options{MaxKeyLen: blobstore.MaxKeyLen - len(keyPrefix)})
	})
	t.Run("Prober", func(t *testing.T) {
		t.Parallel()
		base := NewCapable()
		d, _ := wrap(t, base)
		p, ok := blobstore.As[blobstore.Prober](d)
		if !ok {
			t.Fatal("As[Prober] through the decorator: not found")
		}
		if err := p.Probe(t.Context()); err != nil {
			t.Fatal(err)
		}
		if base.Probes() != 1 {
			t.Fatalf("Probe reached the store %d times, want 1", base.Probes())
		}
		rep, probed, err := blobstore.ReportConditionalWrites(t.Context(), d)
		if err != nil || !probed || rep == nil || rep.RaceRounds != 1 {
			t.Fatalf("ReportConditionalWrites through the decorator = %+v, %v, %v; want the store's report", rep, probed, err)
		}
		base.ProbeErr = blobstore.ErrConditionsIgnored
		if _, err := blobstore.CheckConditionalWrites(t.Context(), d); !errors.Is(err, blobstore.ErrConditionsIgnored) {
			t.Fatalf("CheckConditionalWrites through the decorator = %v, want ErrConditionsIgnored", err)
		}
	})
	t.Run("UploadAborter", func(t *testing.T) {
		t.Parallel()
		base := NewCapable()
		d, keyPrefix := wrap(t, base)
		a, ok := blobstore.As[blobstore.UploadAborter](d)
		if !ok {
			t.Fatal("As[UploadAborter] through the decorator: not found")
		}
		n, err := a.AbortIncompleteUploads(t.Context(), "shared/", time.Hour)
		if err != nil || n != 1 {
			t.Fatalf("AbortIncompleteUploads = %d, %v; want 1, nil", n, err)
		}
		got := base.Aborted()
		if len(got) != 1 || got[0] != keyPrefix+"shared/" {
			t.Fatalf("the store was asked to abort under %q, want [%q]", got, keyPrefix+"shared/")
		}
		if _, err := a.AbortIncompleteUploads(t.Context(), "../x", time.Hour); err != nil && !errors.Is(err, blobstore.ErrInvalidKey) {
			t.Fatalf("AbortIncompleteUploads(../x) = %v, want ErrInvalidKey or nil", err)
		}
		for _, p := range base.Aborted() {
			if !strings.HasPrefix(p, keyPrefix) {
				t.Fatalf("an abort escaped the decorator's prefix %q: %q", keyPrefix, p)
			}
		}
	})
	t.Run("ConditionalDeleter", func(t *testing.T) {
		t.Parallel()
		base := memstore.New()
		d, keyPrefix := wrap(t, base)
		c, ok := blobstore.As[blobstore.ConditionalDeleter](d)
		if !ok {
			t.Fatal("As[ConditionalDeleter] through the decorator: not found")
		}
		etag, err := base.PutIfAbsent(t.Context(), keyPrefix+"k", strings.NewReader("v"))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.DeleteIfMatch(t.Context(), "k", "stale"); !errors.Is(err, blobstore.ErrPreconditionFailed) {
			t.Fatalf("DeleteIfMatch(stale ETag) = %v, want ErrPreconditionFailed", err)
		}
		if err := c.DeleteIfMatch(t.Context(), "k", etag); err != nil {
			t.Fatalf("DeleteIfMatch through the decorator: %v", err)
		}
		if ok, _ := base.Exists(t.Context(), keyPrefix+"k"); ok {
			t.Fatalf("DeleteIfMatch did not reach %q in the store underneath", keyPrefix+"k")
		}
	})
	t.Run("InfoGetter", func(t *testing.T) {
		t.Parallel()
		base := NewCapable()
		d, keyPrefix := wrap(t, base)
		if _, ok := d.(blobstore.InfoGetter); !ok {
			t.Fatal("the decorator is no InfoGetter: its reads would bypass it or take a Stat")
		}
		ctx := t.Context()
		etag, err := d.PutIfAbsent(ctx, "k", strings.NewReader("v"))
		if err != nil {
			t.Fatal(err)
		}
		_, stats := base.InfoGets()
		rc, info, err := blobstore.GetWithInfo(ctx, d, "k")
		if err != nil {
			t.Fatalf("GetWithInfo through the decorator: %v", err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || string(b) != "v" {
			t.Fatalf("GetWithInfo through the decorator read %q, %v; want %q", b, err, "v")
		}
		gets, stats2 := base.InfoGets()
		if gets != 1 || stats2 != stats {
			t.Fatalf("GetWithInfo reached the store as %d GetWithInfo and %d Stat calls, want 1 and 0", gets, stats2-stats)
		}
		st, err := d.Stat(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if info.Key != "k" || info.ETag != etag || info.Size != st.Size {
			t.Fatalf("GetWithInfo info = %+v, want key k, ETag %q, size %d (Stat's)", info, etag, st.Size)
		}
		if ok, _ := base.Exists(ctx, keyPrefix+"k"); !ok {
			t.Fatalf("the object is not at %q in the store underneath", keyPrefix+"k")
		}
	})
}
