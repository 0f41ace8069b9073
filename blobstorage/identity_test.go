package blobstorage

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
	"github.com/tidemark-io/tidemark/checkpoint"
)

// A prefix that holds other data and no mark is not Tidemark's: Acquire
// and GC (dry run too) refuse it before writing or deleting anything, even
// when its keys look like Tidemark's layout.
func TestAForeignStoreIsRefusedBeforeAnythingIsWritten(t *testing.T) {
	bs := newMem()
	for _, k := range []string{"photos/cat.jpg", "shared/report.pdf", "checkpoints/notes.txt", "checkpoints/" + checkpoint.NewID(1) + "/checkpoint.json"} {
		if err := bs.Put(t.Context(), k, strings.NewReader("user data")); err != nil {
			t.Fatal(err)
		}
	}
	before := blobstoretest.ListKeys(t, bs, "")
	s := New(bs, t.TempDir(), Options{Grace: time.Nanosecond})
	if _, err := s.Acquire(t.Context()); !errors.Is(err, ErrForeignStore) || !strings.Contains(err.Error(), "checkpoints/notes.txt") {
		t.Fatalf("Acquire on a foreign store: %v, want ErrForeignStore naming a key", err)
	}
	if _, err := s.GC(t.Context(), GCOptions{DryRun: true, Now: time.Now().Add(time.Hour)}); !errors.Is(err, ErrForeignStore) {
		t.Fatalf("dry-run GC on a foreign store: %v, want ErrForeignStore", err)
	}
	if _, err := s.GC(t.Context(), GCOptions{}); !errors.Is(err, ErrNotWriter) {
		t.Fatalf("GC on a foreign store without the writer role: %v, want ErrNotWriter", err)
	}
	if after := blobstoretest.ListKeys(t, bs, ""); !slices.Equal(after, before) {
		t.Fatalf("a refused store changed: %v, was %v", after, before)
	}
}

// The first writer marks a new store; a store holding only Tidemark's own
// keys (written before marks existed) is adopted; later writers find the
// mark.
func TestTheFirstWriterMarksTheStore(t *testing.T) {
	bs := newMem()
	s := newWriter(t, bs, Options{})
	saveState(t, s, checkpoint.NewID(1), checkpoint.StatusCompleted, stateFiles{"op": {"000001.sst": "x"}})
	if ok, err := bs.Exists(t.Context(), keyMark); err != nil || !ok {
		t.Fatalf("no %s after the first Acquire (%v)", keyMark, err)
	}
	if _, err := New(bs, t.TempDir(), Options{}).Acquire(t.Context()); err != nil {
		t.Fatalf("a second writer on a marked store: %v", err)
	}
	if err := bs.Delete(t.Context(), keyMark); err != nil {
		t.Fatal(err)
	}
	// Only Tidemark's keys: adopted and marked again.
	if _, err := New(bs, t.TempDir(), Options{}).Acquire(t.Context()); err != nil {
		t.Fatalf("Acquire on an unmarked store of Tidemark's keys only: %v", err)
	}
	if ok, _ := bs.Exists(t.Context(), keyMark); !ok {
		t.Fatal("the adopted store was not marked")
	}
}

// CheckStore tells a prefix that holds a Tidemark store (marked, or only
// Tidemark's keys) from an empty one (ErrNoStore) and a foreign one
// (ErrForeignStore), writing nothing.
func TestCheckStoreTellsAStoreFromNothing(t *testing.T) {
	ctx := t.Context()
	empty := newMem()
	if err := New(empty, "", Options{}).CheckStore(ctx); !errors.Is(err, ErrNoStore) {
		t.Fatalf("CheckStore of an empty prefix: %v, want ErrNoStore", err)
	}
	if keys := blobstoretest.ListKeys(t, empty, ""); len(keys) != 0 {
		t.Fatalf("CheckStore wrote %v", keys)
	}
	marked := newMem()
	newWriter(t, marked, Options{})
	if err := New(marked, "", Options{}).CheckStore(ctx); err != nil {
		t.Fatalf("CheckStore of a marked store: %v", err)
	}
	unmarked := newMem()
	if err := unmarked.Put(ctx, "savepoints/v1.tar", strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	if err := New(unmarked, "", Options{}).CheckStore(ctx); err != nil {
		t.Fatalf("CheckStore of a prefix of Tidemark's keys only: %v", err)
	}
	foreign := newMem()
	if err := foreign.Put(ctx, "photos/cat.jpg", strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	if err := New(foreign, "", Options{}).CheckStore(ctx); !errors.Is(err, ErrForeignStore) {
		t.Fatalf("CheckStore of a foreign prefix: %v, want ErrForeignStore", err)
	}
}
