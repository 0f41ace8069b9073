package blobstorage

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/savepoint"
)

// damagedStore saves two checkpoints sharing a table, then overwrites the
// shared table with other bytes of the same length and deletes a private
// file of the second: what VerifyDeep and Scrub must find.
func damagedStore(t *testing.T) (s *Storage, bs blobstore.Blobstore, shared, private string) {
	t.Helper()
	bs = newMem()
	s = newWriter(t, bs, Options{})
	id1, id2 := checkpoint.NewID(1), checkpoint.NewID(2)
	saveState(t, s, id1, checkpoint.StatusCompleted, stateFiles{"op": {"000001.sst": "table one", "MANIFEST-000001": "m1"}})
	saveState(t, s, id2, checkpoint.StatusCompleted, stateFiles{"op": {"000001.sst": "link:" + id1, "MANIFEST-000002": "m2", "OPTIONS": "o"}})
	files, err := s.Files(t.Context(), id2)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files["op"] {
		switch f.Path {
		case "000001.sst":
			shared = f.Key
		case "MANIFEST-000002":
			private = f.Key
		}
	}
	if !strings.HasPrefix(shared, "shared/") || private == "" {
		t.Fatalf("layout not as expected: shared %q, private %q", shared, private)
	}
	if err := bs.Put(t.Context(), shared, strings.NewReader("table 0ne")); err != nil {
		t.Fatal(err)
	}
	if err := bs.Delete(t.Context(), private); err != nil {
		t.Fatal(err)
	}
	return s, bs, shared, private
}

func TestVerifyDeepNamesEveryDamagedKey(t *testing.T) {
	s, _, shared, private := damagedStore(t)
	rep, err := s.VerifyDeep(t.Context(), checkpoint.NewID(2))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Objects != 3 {
		t.Errorf("objects %d, want 3", rep.Objects)
	}
	var keys []string
	for _, d := range rep.Damaged {
		keys = append(keys, d.Key)
		if d.Key == private && !d.Missing || d.Key == shared && (d.Missing || !strings.Contains(d.Reason, "sha256")) {
			t.Errorf("damage of %s: missing %v, reason %q", d.Key, d.Missing, d.Reason)
		}
	}
	if want := []string{private, shared}; !slices.Equal(keys, sortedCopy(want)) {
		t.Fatalf("damaged keys %q, want %q", keys, sortedCopy(want))
	}
	// The first checkpoint shares only the table.
	rep, err = s.VerifyDeep(t.Context(), checkpoint.NewID(1))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Damaged) != 1 || rep.Damaged[0].Key != shared {
		t.Fatalf("checkpoint 1: damage %+v, want only %s", rep.Damaged, shared)
	}
}

func TestVerifyDeepOfAMissingCheckpointIsNotFound(t *testing.T) {
	s := newWriter(t, newMem(), Options{})
	if _, err := s.VerifyDeep(t.Context(), checkpoint.NewID(9)); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Fatalf("VerifyDeep of no checkpoint: %v, want checkpoint.ErrNotFound", err)
	}
}

func TestScrubFindsDamageOnceAndOrphans(t *testing.T) {
	s, bs, shared, private := damagedStore(t)
	ctx := t.Context()
	if _, err := checkpoint.CreateSavepoint(ctx, s, bs, "keep"); err == nil {
		t.Fatal("savepoint of a damaged checkpoint was created")
	}
	// Orphans: a shared table and a crashed save's file no record names.
	strays := []string{"shared/op/" + checkpoint.NewID(7) + "-e1/000009.sst", "checkpoints/" + checkpoint.NewID(8) + "/private/e1/op/MANIFEST-000009"}
	for _, k := range strays {
		if err := bs.Put(ctx, k, strings.NewReader("stray")); err != nil {
			t.Fatal(err)
		}
	}
	// An intact savepoint, written from a third, intact checkpoint.
	saveState(t, s, checkpoint.NewID(3), checkpoint.StatusCompleted, stateFiles{"op": {"000003.sst": "t3", "MANIFEST-000003": "m3"}})
	if _, err := checkpoint.CreateSavepoint(ctx, s, bs, "good"); err != nil {
		t.Fatal(err)
	}

	rep, err := s.Scrub(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK() {
		t.Fatal("scrub of a damaged store is OK")
	}
	if len(rep.Checkpoints) != 3 {
		t.Errorf("%d checkpoints scrubbed, want 3", len(rep.Checkpoints))
	}
	var damaged []string
	for _, d := range rep.Damaged {
		damaged = append(damaged, d.Key)
		if d.Key == shared && len(d.Checkpoints) != 2 {
			t.Errorf("%s referenced by %v, want both checkpoints", shared, d.Checkpoints)
		}
	}
	if want := sortedCopy([]string{private, shared}); !slices.Equal(damaged, want) {
		t.Errorf("damaged %q, want %q", damaged, want)
	}
	// Six distinct objects (2+3+2 referenced, the shared table once).
	if rep.Objects != 6 {
		t.Errorf("objects read %d, want 6", rep.Objects)
	}
	var orphans []string
	for _, o := range rep.Orphans {
		orphans = append(orphans, o.Key)
	}
	if want := sortedCopy(strays); !slices.Equal(orphans, want) {
		t.Errorf("orphans %q, want %q", orphans, want)
	}
	if len(rep.Savepoints) != 1 || rep.Savepoints[0].Label != "good" || rep.Savepoints[0].Damage != nil || rep.Savepoints[0].Files != 2 {
		t.Errorf("savepoints %+v, want good with 2 files, intact", rep.Savepoints)
	}
}

func TestScrubNamesACorruptSavepoint(t *testing.T) {
	for _, format := range []string{"archive", "manifest"} {
		t.Run(format, func(t *testing.T) {
			bs := newMem()
			s := newWriter(t, bs, Options{})
			ctx := t.Context()
			saveState(t, s, checkpoint.NewID(1), checkpoint.StatusCompleted, stateFiles{"op": {"000001.sst": "table", "MANIFEST-000001": "m"}})
			key := checkpoint.SavepointKey("sp")
			if format == "archive" { // as savepoints were stored before the savepoint area
				var buf bytes.Buffer
				if err := checkpoint.ArchiveCheckpoint(ctx, s, checkpoint.NewID(1), &buf); err != nil {
					t.Fatal(err)
				}
				putString(t, bs, key, buf.String())
			} else {
				if _, err := checkpoint.CreateSavepoint(ctx, s, bs, "sp"); err != nil {
					t.Fatal(err)
				}
				sum := sha256.Sum256([]byte("table"))
				key = savepoint.ContentKey(hex.EncodeToString(sum[:]))
			}
			b := blobstoretest.Get(t, bs, key)
			i := strings.Index(string(b), "table")
			if i < 0 {
				t.Fatalf("no file content in %s", key)
			}
			b[i] ^= 1 // a byte of a file, which its digest covers
			putString(t, bs, key, string(b))
			rep, err := s.Scrub(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK() || len(rep.Savepoints) != 1 || rep.Savepoints[0].Damage == nil || rep.Savepoints[0].Damage.Key != key {
				t.Fatalf("corrupt savepoint not reported naming %s: %+v", key, rep.Savepoints)
			}
			if len(rep.Orphans) != 0 {
				t.Errorf("orphans %v in a store with none", rep.Orphans)
			}
		})
	}
}

func sortedCopy(s []string) []string { return slices.Sorted(slices.Values(s)) }

func putString(t *testing.T, bs blobstore.Blobstore, key, s string) {
	t.Helper()
	if err := bs.Put(t.Context(), key, strings.NewReader(s)); err != nil {
		t.Fatal(err)
	}
}
