package demo

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/cmd/tidemark/internal/demofault"
)

// savepointInAnotherStore plays the cross-region story up to the resume:
// the job runs on store east until it crashes mid-way, an operator
// creates savepoint "move" there, copies it to store west and restores it
// there. It returns both stores and the Base the resumed job must report.
func savepointInAnotherStore(t *testing.T) (east, west blobstore.Blobstore, want Base) {
	t.Helper()
	ctx := t.Context()
	east, west = fileStore(t), fileStore(t)
	crashing := node(t, east)
	if _, err := Run(demofault.With(ctx, demofault.Faults{CrashAfter: 10_200}), crashing); !errors.Is(err, ErrCrashed) {
		t.Fatalf("run on east: %v, want ErrCrashed", err)
	}
	id, next := savepointOf(t, east, "move")
	if next == 0 || next >= 20_000 {
		t.Fatalf("savepoint at offset %d: want one mid-way (the test proves nothing)", next)
	}
	if err := checkpoint.CopySavepoint(ctx, east, west, "move"); err != nil {
		t.Fatal(err)
	}
	dst := blobstorage.New(west, t.TempDir(), blobstorage.Options{})
	if _, err := dst.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := checkpoint.RestoreSavepoint(ctx, dst, west, "move"); err != nil || got != id {
		t.Fatalf("restore into west = %q, %v; want %q", got, err, id)
	}
	return east, west, Base{Offset: next, Checkpoint: id}
}

func TestRunResumedFromASavepointInAnotherStoreIsExactlyOnce(t *testing.T) {
	east, west, want := savepointInAnotherStore(t)
	res := mustComplete(t, node(t, west))
	if res.RestoredID != want.Checkpoint || res.StartOffset != want.Offset || res.Check.Base != want {
		t.Fatalf("resume on west %+v: want a restore of %s at %d, output base %+v", res, want.Checkpoint, want.Offset, want)
	}
	if res.Check.OutputTotal != 20_000-want.Offset {
		t.Errorf("west holds the output of %d records, want %d", res.Check.OutputTotal, 20_000-want.Offset)
	}
	verdict := res.Check.String()
	for _, s := range []string{"exactly-once: OK, 20000 records", "output in this store from record", "resumed from a savepoint"} {
		if !strings.Contains(verdict, s) {
			t.Errorf("verdict %q lacks %q", verdict, s)
		}
	}
	// east's output up to the savepoint and west's output together hold
	// every record exactly once (east may have committed more before its
	// crash: that output is not the savepoint's).
	ctx := t.Context()
	total, err := blobOutput(ctx, east, OutputPrefix, func(id string) bool { return id <= want.Checkpoint })
	if err != nil {
		t.Fatal(err)
	}
	westOut, err := blobOutput(ctx, west, OutputPrefix, all)
	if err != nil {
		t.Fatal(err)
	}
	for w, n := range westOut.Counts {
		total.Counts[w] += n
	}
	if d, n := diff(total.Counts, NewSource(20_000, 200).Expected()); n != 0 {
		t.Errorf("east's output to the savepoint + west's differ from the source in %d words: %v", n, d)
	}

	// Later runs in west restore checkpoints whose output is here: the
	// marker keeps the base.
	again := mustComplete(t, node(t, west))
	if again.Check.Base != want || again.RestoredID == want.Checkpoint {
		t.Fatalf("second run on west %+v: want base %+v from the marker", again, want)
	}
}

func TestRunResumedFromASavepointSurvivesACrashInTheNewStore(t *testing.T) {
	_, west, want := savepointInAnotherStore(t)
	crashing := node(t, west)
	// Crash after west committed some output.
	res, err := Run(demofault.With(t.Context(), demofault.Faults{CrashAfter: 16_200}), crashing)
	if !errors.Is(err, ErrCrashed) {
		t.Fatalf("crashing run on west: %v (%+v), want ErrCrashed", err, res)
	}
	if res.Checkpoints == 0 {
		t.Fatal("west committed nothing before the crash: the test proves nothing")
	}
	resumed := mustComplete(t, node(t, west))
	if resumed.RestoredID == want.Checkpoint || resumed.Check.Base != want {
		t.Fatalf("resume after the crash %+v: want a restore of a west checkpoint, base %+v", resumed, want)
	}
}

func TestRunResumedFromASavepointStillDetectsWrongOutput(t *testing.T) {
	ctx := t.Context()
	committed := func(t *testing.T, bs blobstore.Blobstore) []string { return committedIDs(t, bs, all) }
	copyOut := copyCommit
	cases := []struct {
		name string
		// before damages west before the job resumes there, after once
		// it completed there.
		before, after func(t *testing.T, east, west blobstore.Blobstore)
		fromSavepoint bool // the failed verdict still names the savepoint base
	}{
		{
			name: "a transaction of west doubled",
			after: func(t *testing.T, _, west blobstore.Blobstore) {
				ids := committed(t, west)
				copyOut(t, west, west, ids[len(ids)-1], checkpoint.NewID(999))
			},
			fromSavepoint: true,
		},
		{
			name: "a transaction of west missing",
			after: func(t *testing.T, _, west blobstore.Blobstore) {
				if err := west.Delete(ctx, CommitPrefix+committed(t, west)[0]); err != nil {
					t.Fatal(err)
				}
			},
			fromSavepoint: true,
		},
		{
			name: "east's output before the savepoint also committed in west",
			after: func(t *testing.T, east, west blobstore.Blobstore) {
				id := committed(t, east)[0]
				copyOut(t, east, west, id, id)
			},
			fromSavepoint: true,
		},
		{
			name: "east's output copied into west before the resume",
			before: func(t *testing.T, east, west blobstore.Blobstore) {
				id := committed(t, east)[0]
				copyOut(t, east, west, id, id)
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			east, west, want := savepointInAnotherStore(t)
			if c.before != nil {
				c.before(t, east, west)
				res, err := Run(ctx, node(t, west))
				if !errors.Is(err, ErrNotExactlyOnce) || res.Check.OutputWrong == 0 {
					t.Fatalf("resume over damaged output: %v, check %s; want ErrNotExactlyOnce", err, res.Check)
				}
				if res.Check.Base != (Base{}) {
					t.Errorf("base %+v: west already held output at or below the savepoint, want none", res.Check.Base)
				}
				return
			}
			mustComplete(t, node(t, west))
			c.after(t, east, west)
			res, err := Run(ctx, node(t, west))
			if !errors.Is(err, ErrNotExactlyOnce) || res.Check.OK() || res.Check.OutputWrong == 0 || res.Check.StateWrong != 0 {
				t.Fatalf("run over damaged output: %v, check %s; want ErrNotExactlyOnce on the output only", err, res.Check)
			}
			if c.fromSavepoint && (res.Check.Base != want || !strings.Contains(res.Check.String(), "resumed from a savepoint")) {
				t.Errorf("failed check %q (base %+v) does not name the savepoint base %+v", res.Check, res.Check.Base, want)
			}
		})
	}
}

func TestRunStartingFreshRemovesAStaleBaseMarker(t *testing.T) {
	ctx := t.Context()
	bs := fileStore(t)
	// A Tidemark store (marked by a writer) with no checkpoint left.
	if _, err := blobstorage.New(bs, t.TempDir(), blobstorage.Options{}).Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	stale := `{"offset":9000,"checkpoint":"` + checkpoint.NewID(3) + `"}`
	if err := bs.Put(ctx, BaseKey, strings.NewReader(stale)); err != nil {
		t.Fatal(err)
	}
	res := mustComplete(t, node(t, bs))
	if res.Action != checkpoint.ActionStartFresh || res.Check.Base != (Base{}) {
		t.Fatalf("fresh run %+v: want base zero", res)
	}
	if ok, err := bs.Exists(ctx, BaseKey); err != nil || ok {
		t.Fatalf("stale marker still there (%v)", err)
	}
	if again := mustComplete(t, node(t, bs)); again.Check.Base != (Base{}) {
		t.Fatalf("resume after a fresh start: base %+v, want zero", again.Check.Base)
	}
}

func TestRunOnFileStorageResumedFromASavepointIsExactlyOnce(t *testing.T) {
	ctx := t.Context()
	_, west, want := savepointInAnotherStore(t)
	// The savepoint restored into a FileStorage, the sink in west.
	dir := t.TempDir()
	fs := checkpoint.NewFileStorage(filepath.Join(dir, "checkpoints"))
	if _, err := checkpoint.RestoreSavepoint(ctx, fs, west, "move"); err != nil {
		t.Fatal(err)
	}
	cfg := node(t, west)
	cfg.Storage = fs
	if res := mustComplete(t, cfg); res.Check.Base != want {
		t.Fatalf("base %+v, want %+v", res.Check.Base, want)
	}
}
