package blobstorage

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/internal/pebblefile"
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
	if _, err := s.GC(t.Context(), GCOptions{Now: time.Now().Add(time.Hour)}); !errors.Is(err, ErrForeignStore) {
		t.Fatalf("GC on a foreign store: %v, want ErrForeignStore", err)
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
	src := newWriter(t, newMem(), Options{})
	saveState(t, src, checkpoint.NewID(1), checkpoint.StatusCompleted, stateFiles{"op": {"000001.sst": "x"}})
	if _, err := checkpoint.CreateSavepoint(ctx, src, unmarked, "v1"); err != nil {
		t.Fatal(err)
	}
	if err := New(unmarked, "", Options{}).CheckStore(ctx); err != nil {
		t.Fatalf("CheckStore of a prefix holding only a savepoint: %v", err)
	}
	foreign := newMem()
	if err := foreign.Put(ctx, "photos/cat.jpg", strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	if err := New(foreign, "", Options{}).CheckStore(ctx); !errors.Is(err, ErrForeignStore) {
		t.Fatalf("CheckStore of a foreign prefix: %v, want ErrForeignStore", err)
	}
}

// The layout's grammar, one case per key class: Tidemark's keys parse, a
// user's look-alike beside them does not.
func TestParseKeyTellsTheLayoutFromLookAlikes(t *testing.T) {
	id := checkpoint.NewID(7)
	ours := map[string]keyKind{
		"_tidemark":         kindMark,
		"_writer":           kindWriter,
		"_latest":           kindPointer,
		"_latest-completed": kindPointer,
		"_replication":      kindReplication,
		recordKey(id):       kindRecord,
		privateKey(id, 3, "op", "MANIFEST-000001"):                     kindPrivate,
		privateKey(id, 3, "op", "sub/000002.log"):                      kindPrivate,
		partKey(id, 3, "op", "w-0a1b"):                                 kindPart,
		workerPrivateKey(id, 3, "op", "w-0a1b", "MANIFEST"):            kindPartFile,
		sharedKey(id, 3, "op", "000001.sst"):                           kindShared,
		sharedKey(id, 3, "op", "sub/000009.blob"):                      kindShared,
		workerSharedKey(id, 3, "op", "w-0a1b", "000001.sst"):           kindShared,
		"remote/op/e3-0011223344556677/1a3f-2-000001.sst":              kindRemote,
		"remote/op/e3-0011223344556677/1a3f-2-000001.sst.ref.5.000008": kindRemote,
		pinKey(id, "00112233445566778899aabbccddeeff"):                 kindPin,
		"savepoints/before-upgrade":                                    kindSavepoint,
		"savepoint-data/sha256/" + strings.Repeat("ab", 32):            kindSavepoint,
		"savepoint-data/locks/shared-0011223344556677":                 kindSavepoint,
		"_tidemark_probe/00112233445566778899aabbccddeeff/object":      kindProbe,
		// Every name s3store's probe writes under its nonce.
		"_tidemark_probe/00112233445566778899aabbccddeeff/missing":         kindProbe,
		"_tidemark_probe/00112233445566778899aabbccddeeff/race-create-2":   kindProbe,
		"_tidemark_probe/00112233445566778899aabbccddeeff/race-swap":       kindProbe,
		"_tidemark_probe/00112233445566778899aabbccddeeff/delete":          kindProbe,
		"_tidemark_probe/00112233445566778899aabbccddeeff/checksum-crc32c": kindProbe,
		"_tidemark_probe/00112233445566778899aabbccddeeff/back\\slash":     kindProbe,
		"_tidemark_probe/00112233445566778899aabbccddeeff/back/slash":      kindProbe,
	}
	for key, kind := range ours {
		p, ok := parseKey(key, pebblefile.Immutable)
		if !ok || p.kind != kind {
			t.Errorf("parseKey(%q) = %+v, %v; want kind %d", key, p, ok, kind)
		}
	}
	theirs := []string{
		"checkpoints/old/notes.txt",
		"checkpoints/" + id + "/notes.txt",
		"checkpoints/" + id + "/private/e3/op",
		"checkpoints/" + id + "/private/e0/op/MANIFEST",
		"checkpoints/" + id + "/private/draft/op/MANIFEST",
		"checkpoints/" + id + "/parts/e3/op/w/notes.txt",
		"checkpoints/notes.txt",
		"shared/team/report.pdf",
		"shared/op/" + id + "-e3/report.pdf",
		"shared/op/" + id + "-e3/MANIFEST-000001",
		"shared/op/" + id + "/000001.sst",
		"shared/op/2024-archive/000001.sst",
		"remote/op/e3-0011/notes.txt",
		"remote/op/g-0011/1a3f-2-000001.sst",
		"remote/op/1a3f-2-000001.sst",
		"pins/readme.txt",
		"pins/" + id + "/a/b",
		"savepoints/team/v1.tar",
		"savepoint-data/notes.txt",
		"savepoint-data/sha256/report.pdf",
		"savepoint-data/locks/mine",
		"_latest.bak",
		"_tidemark_probe/notes.txt",
		"_tidemark_probe/0011/object",
		"_tidemark_probe/00112233445566778899AABBCCDDEEFF/object",
		"photos/cat.jpg",
	}
	for _, key := range theirs {
		if p, ok := parseKey(key, pebblefile.Immutable); ok {
			t.Errorf("parseKey(%q) = %+v: a user's file taken for Tidemark's", key, p)
		}
	}
}

// lookAlikeOf holds, for each key class of the layout, a user's file
// named like one (id is a checkpoint of the real data beside it): none
// parses, so none may decide a store's identity or be planned over by GC.
func lookAlikeOf(id string) map[keyKind]string {
	return map[keyKind]string{
		kindMark:        "_tidemark.txt",
		kindWriter:      "_writer.bak",
		kindPointer:     "_latest-completed.old",
		kindRecord:      "checkpoints/" + id + "/checkpoint.json.bak",
		kindPrivate:     "checkpoints/" + id + "/private/draft/w0/MANIFEST",
		kindPart:        "checkpoints/" + id + "/parts/e1/w0/w-1/notes.txt",
		kindPartFile:    "checkpoints/" + id + "/parts/e1/w0/w-1/other/000001.sst",
		kindShared:      "shared/w0/" + id + "-e1/report.pdf",
		kindRemote:      "remote/w0/e1-00aa/notes.txt",
		kindPin:         "pins/" + id + "/a/b",
		kindSavepoint:   "savepoints/team/v1.tar",
		kindProbe:       "_tidemark_probe/notes.txt",
		kindReplication: "_replication.json",
	}
}

// Every key class has its look-alike in lookAlikeOf, and the folder-name
// cases of the issue are there as well.
func lookAlikes(id string) []string {
	keys := []string{"checkpoints/old/notes.txt", "shared/team/report.pdf", "pins/readme.txt", "notes.txt",
		"checkpoints/" + id + "/notes.txt", "checkpoints/" + id + "/private/readme", "checkpoints/" + id + "/private/e0/w0/MANIFEST",
		"shared/w0/drafts/000001.sst", "remote/x"}
	for _, k := range lookAlikeOf(id) {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func TestEveryKeyClassHasALookAlike(t *testing.T) {
	m := lookAlikeOf(checkpoint.NewID(1))
	for k := kindMark; k <= kindReplication; k++ {
		key, ok := m[k]
		if !ok {
			t.Errorf("key class %d has no look-alike in lookAlikeOf", k)
			continue
		}
		if p, ok := parseKey(key, pebblefile.Immutable); ok {
			t.Errorf("look-alike %q parses as %+v", key, p)
		}
	}
}

// An unmarked prefix holding a job's real data (written before marks
// existed) and one look-alike of any key class is not Tidemark's: Acquire,
// CheckStore and GC refuse it and write nothing. Without the look-alike it
// is adopted.
func TestALookAlikeBesideRealDataMakesAnUnmarkedStoreForeign(t *testing.T) {
	id := checkpoint.NewID(1)
	for _, lookAlike := range lookAlikes(id) {
		t.Run(lookAlike, func(t *testing.T) {
			bs := newMem()
			compactingHistory(t, newWriter(t, bs, Options{}), 4)
			if err := bs.Delete(ctx, keyMark); err != nil { // a store from before marks
				t.Fatal(err)
			}
			if err := bs.Put(ctx, lookAlike, strings.NewReader("user data")); err != nil {
				t.Fatal(err)
			}
			before := storeETags(t, bs)
			later := time.Now().Add(72 * time.Hour)
			if err := New(bs, "", Options{}).CheckStore(ctx); !errors.Is(err, ErrForeignStore) {
				t.Errorf("CheckStore: %v, want ErrForeignStore", err)
			}
			for _, dry := range []bool{true, false} {
				if _, err := New(bs, "", Options{Keep: 1}).GC(ctx, GCOptions{DryRun: dry, Now: later}); !errors.Is(err, ErrForeignStore) {
					t.Errorf("GC (dry run %v): %v, want ErrForeignStore", dry, err)
				}
			}
			if _, err := New(bs, t.TempDir(), Options{}).Acquire(ctx); !errors.Is(err, ErrForeignStore) {
				t.Errorf("Acquire: %v, want ErrForeignStore", err)
			}
			if after := storeETags(t, bs); !reflect.DeepEqual(after, before) {
				t.Fatalf("a refused store changed:\nbefore %v\nafter  %v", before, after)
			}
			if err := bs.Delete(ctx, lookAlike); err != nil {
				t.Fatal(err)
			}
			if err := New(bs, "", Options{}).CheckStore(ctx); err != nil {
				t.Errorf("without the look-alike: %v", err)
			}
		})
	}
}

// Keys that all parse are not enough: an unmarked prefix must hold a
// valid record or savepoint to be Tidemark's.
func TestAnUnmarkedStoreNeedsAValidRecordOrSavepoint(t *testing.T) {
	bs := newMem()
	for _, k := range []string{recordKey(checkpoint.NewID(1)), "savepoints/v1", "_latest"} {
		if err := bs.Put(ctx, k, strings.NewReader("not JSON, not an archive")); err != nil {
			t.Fatal(err)
		}
	}
	if err := New(bs, "", Options{}).CheckStore(ctx); !errors.Is(err, ErrForeignStore) {
		t.Fatalf("CheckStore: %v, want ErrForeignStore", err)
	}
	if _, err := New(bs, t.TempDir(), Options{}).Acquire(ctx); !errors.Is(err, ErrForeignStore) {
		t.Fatalf("Acquire: %v, want ErrForeignStore", err)
	}
	if ok, _ := bs.Exists(ctx, keyMark); ok {
		t.Fatal("a refused store was marked")
	}
}
