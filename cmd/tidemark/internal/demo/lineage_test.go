package demo

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/cmd/tidemark/internal/demofault"
)

// savepointOf creates savepoint label of the latest completed checkpoint
// of bs and returns its id and source offset.
func savepointOf(t *testing.T, bs blobstore.Blobstore, label string) (string, uint64) {
	t.Helper()
	ctx := t.Context()
	reader := blobstorage.New(bs, "", blobstorage.Options{})
	id, err := checkpoint.CreateSavepoint(ctx, reader, bs, label)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := reader.LoadSpecific(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	off, err := DecodeOffsets(cp.Offsets())
	if err != nil {
		t.Fatal(err)
	}
	return id, off.Next
}

// rollBack restores savepoint label onto bs, the store it was taken
// from, as `tidemark savepoint restore` does, and returns the id it was
// restored as: a new lineage.
func rollBack(t *testing.T, bs blobstore.Blobstore, label, from string) string {
	t.Helper()
	ctx := t.Context()
	dst := blobstorage.New(bs, t.TempDir(), blobstorage.Options{})
	if _, err := dst.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	id, err := checkpoint.RestoreSavepoint(ctx, dst, bs, label)
	if err != nil {
		t.Fatal(err)
	}
	if id <= from {
		t.Fatalf("savepoint %s restored as %s: want a new lineage (a later id)", from, id)
	}
	return id
}

// crashMidWay runs the job on bs until it crashes at record at.
func crashMidWay(t *testing.T, bs blobstore.Blobstore, at uint64) {
	t.Helper()
	if _, err := Run(demofault.With(t.Context(), demofault.Faults{CrashAfter: at}), node(t, bs)); !errors.Is(err, ErrCrashed) {
		t.Fatalf("crashing run: %v, want ErrCrashed", err)
	}
}

// The rollback of docs/cli.md's CLI block: crash, savepoint, complete, restore the
// savepoint on the same store, run again (twice).
func TestRunRolledBackToASavepointOnTheSameStoreIsExactlyOnce(t *testing.T) {
	bs := fileStore(t)
	crashMidWay(t, bs, 10_200)
	sp, off := savepointOf(t, bs, "mid")
	if off == 0 || off >= 20_000 {
		t.Fatalf("savepoint at offset %d: want one mid-way (the test proves nothing)", off)
	}
	first := mustComplete(t, node(t, bs))
	if first.Check.Abandoned != 0 {
		t.Fatalf("run before any rollback: %s, want no abandoned transaction", first.Check)
	}
	restored := rollBack(t, bs, "mid", sp)

	res := mustComplete(t, node(t, bs))
	if res.RestoredID != restored || res.StartOffset != off {
		t.Fatalf("run after the rollback %+v: want a restore of %s at %d", res, restored, off)
	}
	if res.Check.OutputTotal != 20_000 || res.Check.Base != (Base{}) {
		t.Errorf("check %s (base %+v): want the output of 20000 records, base zero", res.Check, res.Check.Base)
	}
	if res.Check.Abandoned == 0 || !strings.Contains(res.Check.String(), "abandoned") {
		t.Errorf("check %q: want it to say it left the abandoned lineage's transactions out", res.Check)
	}
	for i := range 2 {
		again := mustComplete(t, node(t, bs))
		if again.Check.OutputTotal != 20_000 || again.Check.Abandoned != res.Check.Abandoned {
			t.Fatalf("run %d after the rollback: %s, want the same lineage as %s", i+2, again.Check, res.Check)
		}
	}
}

// Rollbacks on rollbacks: to a savepoint of the new lineage, to the first
// savepoint again, and to a savepoint of a restored checkpoint that never
// ran (it holds the history of the checkpoint it was restored from).
func TestRunRolledBackAgainAndAgainIsExactlyOnce(t *testing.T) {
	bs := fileStore(t)
	crashMidWay(t, bs, 10_200)
	a, _ := savepointOf(t, bs, "a")
	mustComplete(t, node(t, bs))

	r1 := rollBack(t, bs, "a", a)
	crashMidWay(t, bs, 15_200) // the new lineage, part of the way
	b, offB := savepointOf(t, bs, "b")
	if b <= r1 {
		t.Fatalf("savepoint b is of %s, not of the lineage restored as %s: the test proves nothing", b, r1)
	}
	mustComplete(t, node(t, bs))

	rollBack(t, bs, "b", b)
	if res := mustComplete(t, node(t, bs)); res.StartOffset != offB || res.Check.Abandoned == 0 {
		t.Fatalf("run after the rollback to b: %+v, want a start at %d leaving out abandoned output", res, offB)
	}
	mustComplete(t, node(t, bs))

	rollBack(t, bs, "a", a)
	mustComplete(t, node(t, bs))

	r4 := rollBack(t, bs, "a", a)
	c, _ := savepointOf(t, bs, "c")
	if c != r4 {
		t.Fatalf("savepoint c is of %s, want the restored %s", c, r4)
	}
	mustComplete(t, node(t, bs)) // the lineage of r4 commits output
	rollBack(t, bs, "c", c)
	mustComplete(t, node(t, bs))
	mustComplete(t, node(t, bs))
}

// After a rollback the check is as strict about the new lineage's output
// and its history (the old lineage's output up to the savepoint) as
// without one.
func TestRunRolledBackStillDetectsWrongOutput(t *testing.T) {
	ctx := t.Context()
	cases := []struct {
		name   string
		damage func(t *testing.T, bs blobstore.Blobstore, savepoint, restored string)
	}{
		{"a transaction of the new lineage doubled", func(t *testing.T, bs blobstore.Blobstore, _, restored string) {
			duplicateTransaction(t, bs, committedIDs(t, bs, func(id string) bool { return id > restored })[0])
		}},
		{"a transaction of the new lineage missing", func(t *testing.T, bs blobstore.Blobstore, _, restored string) {
			if err := bs.Delete(ctx, CommitPrefix+committedIDs(t, bs, func(id string) bool { return id > restored })[0]); err != nil {
				t.Fatal(err)
			}
		}},
		{"a transaction before the savepoint missing", func(t *testing.T, bs blobstore.Blobstore, savepoint, _ string) {
			if err := bs.Delete(ctx, CommitPrefix+committedIDs(t, bs, func(id string) bool { return id <= savepoint })[0]); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bs := fileStore(t)
			crashMidWay(t, bs, 10_200)
			sp, _ := savepointOf(t, bs, "mid")
			mustComplete(t, node(t, bs))
			restored := rollBack(t, bs, "mid", sp)
			mustComplete(t, node(t, bs))
			c.damage(t, bs, sp, restored)
			res, err := Run(ctx, node(t, bs))
			if !errors.Is(err, ErrNotExactlyOnce) || res.Check.OK() || res.Check.OutputWrong == 0 || res.Check.StateWrong != 0 {
				t.Fatalf("run over damaged output: %v, check %s; want ErrNotExactlyOnce on the output only", err, res.Check)
			}
			if !strings.Contains(res.Check.String(), "abandoned") {
				t.Errorf("failed check %q does not say it left the abandoned lineage out", res.Check)
			}
		})
	}
}

func TestLineageIncludesAllButTheAbandonedTransactions(t *testing.T) {
	id := checkpoint.NewID
	one := Lineage{{Through: id(5)}}
	for _, n := range []uint64{1, 5, 6, 999} {
		if !one.Includes(id(n)) || !Lineage(nil).Includes(id(n)) {
			t.Errorf("a lineage without rollback leaves out %s", id(n))
		}
	}
	// Rolled back to 2 as 7, then to 8 (of that lineage) as 10.
	l := Lineage{{Through: id(2)}, {After: id(7), Through: id(8)}, {After: id(10), Through: id(12)}}
	for n, want := range map[uint64]bool{1: true, 2: true, 3: false, 7: false, 8: true, 9: false, 10: false, 11: true, 12: true, 13: true} {
		if got := l.Includes(id(n)); got != want {
			t.Errorf("Includes(%s) = %v, want %v", id(n), got, want)
		}
	}
}

// A job started at checkpoint 6 from another job's state leaves out the
// earlier job's transactions (at or below 6), and, rolled back later
// within itself, its own abandoned ones.
func TestLineageOfAStartedJobLeavesOutTheEarlierJob(t *testing.T) {
	id := checkpoint.NewID
	l := Lineage{{After: id(6), Through: id(8)}, {After: id(10), Through: id(12)}}
	if err := l.validate(); err != nil {
		t.Fatalf("a started job's lineage: %v", err)
	}
	if l.StartedAt() != id(6) || (Lineage{{Through: id(3)}}).StartedAt() != "" {
		t.Fatalf("StartedAt = %q", l.StartedAt())
	}
	for n, want := range map[uint64]bool{1: false, 6: false, 7: true, 8: true, 9: false, 10: false, 11: true, 13: true} {
		if got := l.Includes(id(n)); got != want {
			t.Errorf("Includes(%s) = %v, want %v", id(n), got, want)
		}
	}
}

func TestResumeLineage(t *testing.T) {
	id := checkpoint.NewID
	cp := func(n uint64, restoredFrom string) *checkpoint.CheckpointData {
		d := &checkpoint.CheckpointData{ID: id(n), Source: map[string][]byte{}}
		if restoredFrom != "" {
			d.Source[checkpoint.RestoredFromKey] = []byte(restoredFrom)
		}
		return d
	}
	cases := []struct {
		name    string
		cp      *checkpoint.CheckpointData
		lineage Lineage
		want    Lineage // through id(20)
		corrupt bool
	}{
		{name: "fresh", want: Lineage{{Through: id(20)}}},
		{name: "resume", cp: cp(4, ""), lineage: Lineage{{Through: id(4)}}, want: Lineage{{Through: id(20)}}},
		{name: "rolled back", cp: cp(9, id(2)), lineage: Lineage{{Through: id(2)}},
			want: Lineage{{Through: id(2)}, {After: id(9), Through: id(20)}}},
		{name: "resume after a rollback", cp: cp(12, ""), lineage: Lineage{{Through: id(2)}, {After: id(9), Through: id(12)}},
			want: Lineage{{Through: id(2)}, {After: id(9), Through: id(20)}}},
		{name: "legacy resume", cp: cp(4, ""), want: Lineage{{Through: id(20)}}},
		{name: "legacy rolled back", cp: cp(9, id(2)), want: Lineage{{Through: id(2)}, {After: id(9), Through: id(20)}}},
		{name: "lineage past the checkpoint", cp: cp(4, ""), lineage: Lineage{{Through: id(5)}}, corrupt: true},
		{name: "segments out of order", cp: cp(9, ""), lineage: Lineage{{Through: id(5)}, {After: id(3), Through: id(9)}}, corrupt: true},
		{name: "bad id", cp: cp(9, ""), lineage: Lineage{{Through: "x"}}, corrupt: true},
		{name: "job start", cp: jobStart(cp(9, id(2))), lineage: Lineage{{Through: id(2)}},
			want: Lineage{{After: id(9), Through: id(20)}}},
		{name: "resume a started job", cp: cp(12, ""), lineage: Lineage{{After: id(9), Through: id(12)}},
			want: Lineage{{After: id(9), Through: id(20)}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			run, err := resumeLineage(c.cp, operatorState{Lineage: c.lineage})
			if c.corrupt {
				if !errors.Is(err, ErrCorruptOutput) {
					t.Fatalf("resumeLineage = %+v, %v; want ErrCorruptOutput", run, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := run.through(id(20)); !slices.Equal(got, c.want) {
				t.Fatalf("lineage through %s = %+v, want %+v", id(20), got, c.want)
			}
		})
	}
}

// A job moved to store west by a savepoint, then rolled back on west to
// that savepoint: west's output starts at the savepoint still, and the
// first lineage of west is abandoned.
func TestRunRolledBackInAnotherStoreToTheSavepointItCameFrom(t *testing.T) {
	_, west, want := savepointInAnotherStore(t)
	mustComplete(t, node(t, west))
	restored := rollBack(t, west, "move", want.Checkpoint)
	for i := range 2 {
		res := mustComplete(t, node(t, west))
		if res.Check.Base != want || res.Check.OutputTotal != 20_000-want.Offset || res.Check.Abandoned == 0 {
			t.Fatalf("run %d after the rollback on west: %s (base %+v), want base %+v, abandoned output left out", i+1, res.Check, res.Check.Base, want)
		}
		if i == 0 && res.RestoredID != restored {
			t.Fatalf("run after the rollback restored %s, want %s", res.RestoredID, restored)
		}
	}
}

// jobStart marks d as the first checkpoint of a new job.
func jobStart(d *checkpoint.CheckpointData) *checkpoint.CheckpointData {
	d.JobID = "job-new"
	d.Source[checkpoint.JobStartKey] = []byte(d.JobID)
	return d
}
