package blobstorage

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
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
