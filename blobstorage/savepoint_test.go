package blobstorage

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/savepoint"
)

// breakingReads is a store whose reads of large objects lose their
// connection once, mid-body, as a reset connection does.
type breakingReads struct {
	blobstore.Blobstore
	mu     sync.Mutex
	broken map[string]bool
	breaks int
}

var errConnReset = errors.New("read: connection reset by peer")

func (b *breakingReads) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	rc, err := b.Blobstore.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	info, err := b.Blobstore.Stat(ctx, key)
	if err != nil || info.Size < 64<<10 { // records and pointers are small and read whole
		return rc, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.broken[key] {
		return rc, nil
	}
	b.broken[key] = true
	b.breaks++
	return &breakAfter{ReadCloser: rc, left: info.Size / 2}, nil
}

type breakAfter struct {
	io.ReadCloser
	left int64
}

func (r *breakAfter) Read(p []byte) (int, error) {
	if r.left <= 0 {
		return 0, errConnReset
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, err := r.ReadCloser.Read(p)
	r.left -= int64(n)
	return n, err
}

// Savepoint create, copy and restore survive a connection lost mid-body,
// as Restore does: every read path resumes.
func TestSavepointsSurviveAReadBrokenMidBody(t *testing.T) {
	big := string(bytes.Repeat([]byte("state "), 20_000))
	src := &breakingReads{Blobstore: newMem(), broken: map[string]bool{}}
	s := newWriter(t, src, Options{})
	saveState(t, s, checkpoint.NewID(1), checkpoint.StatusCompleted, stateFiles{"op": {"000001.sst": big, "MANIFEST-000001": big + "m"}})

	if _, err := checkpoint.CreateSavepoint(t.Context(), s, src, "v1"); err != nil {
		t.Fatalf("CreateSavepoint through broken reads: %v", err)
	}
	dst := &breakingReads{Blobstore: newMem(), broken: map[string]bool{}}
	if err := checkpoint.CopySavepoint(t.Context(), src, dst, "v1"); err != nil {
		t.Fatalf("CopySavepoint through broken reads: %v", err)
	}
	restored := New(dst, t.TempDir(), Options{})
	if _, err := restored.Acquire(t.Context()); err != nil {
		t.Fatal(err)
	}
	id, err := checkpoint.RestoreSavepoint(t.Context(), restored, dst, "v1")
	if err != nil {
		t.Fatalf("RestoreSavepoint through broken reads: %v", err)
	}
	if src.breaks < 3 || dst.breaks < 1 {
		t.Fatalf("reads broken: %d in the source, %d in the copy; the test did not break the paths it means to", src.breaks, dst.breaks)
	}
	got := restoreElsewhere(t, dst, id)
	if len(got) != 2 {
		t.Fatalf("restored %d files, want 2", len(got))
	}
	for p, c := range got {
		want := big
		if strings.HasSuffix(p, "MANIFEST-000001") {
			want = big + "m"
		}
		if c != want {
			t.Fatalf("restored %s differs", p)
		}
	}
}

// GC of checkpoints leaves savepoints alone: their labels, their content
// in the savepoint area (even content no savepoint references, which
// only a savepoint delete judges) and their locks.
func TestGCLeavesTheSavepointAreaAlone(t *testing.T) {
	bs := newMem()
	s := newWriter(t, bs, Options{Keep: 1, Grace: time.Nanosecond})
	saveState(t, s, checkpoint.NewID(1), checkpoint.StatusCompleted, stateFiles{"op": {"000001.sst": "t1", "MANIFEST-000001": "m1"}})
	if _, err := checkpoint.CreateSavepoint(t.Context(), s, bs, "v1"); err != nil {
		t.Fatal(err)
	}
	stray := savepoint.ContentKey(strings.Repeat("ab", 32))
	lock := savepoint.LockPrefix + "shared-0123456789abcdef"
	for _, k := range []string{stray, lock} {
		if err := bs.Put(t.Context(), k, strings.NewReader("x")); err != nil {
			t.Fatal(err)
		}
	}
	saveState(t, s, checkpoint.NewID(2), checkpoint.StatusCompleted, stateFiles{"op": {"000002.sst": "t2", "MANIFEST-000002": "m2"}})
	saveState(t, s, checkpoint.NewID(3), checkpoint.StatusCompleted, stateFiles{"op": {"000003.sst": "t3", "MANIFEST-000003": "m3"}})
	before := blobstoretest.ListKeys(t, bs, savepoint.AreaPrefix)
	rep, err := s.GC(t.Context(), GCOptions{Now: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Objects == 0 {
		t.Fatal("GC deleted nothing: the test checks nothing")
	}
	if after := blobstoretest.ListKeys(t, bs, savepoint.AreaPrefix); !slices.Equal(before, after) || !slices.Contains(after, stray) {
		t.Fatalf("the savepoint area before GC %v, after %v", before, after)
	}
	dst := New(newMem(), t.TempDir(), Options{})
	if _, err := dst.Acquire(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := checkpoint.RestoreSavepoint(t.Context(), dst, bs, "v1"); err != nil {
		t.Fatalf("the savepoint after GC: %v", err)
	}
}
