package demo

import (
	"errors"
	"strings"
	"testing"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/cmd/tidemark/internal/demofault"
)

// newJobFrom copies savepoint label of store from onto store to, which
// holds another job's checkpoints and output, and restores it there as
// a new job, as `tidemark savepoint restore --new-job` does. Without the
// new job the restore is refused.
func newJobFrom(t *testing.T, from, to blobstore.Blobstore, label string) string {
	t.Helper()
	ctx := t.Context()
	if err := checkpoint.CopySavepoint(ctx, from, to, label); err != nil {
		t.Fatal(err)
	}
	dst := blobstorage.New(to, t.TempDir(), blobstorage.Options{})
	if _, err := dst.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := checkpoint.RestoreSavepoint(ctx, dst, to, label); !errors.Is(err, checkpoint.ErrOtherJob) {
		t.Fatalf("restore of another job's savepoint = %v, want ErrOtherJob", err)
	}
	id, err := checkpoint.RestoreSavepointWith(ctx, dst, to, label, checkpoint.RestoreOptions{NewJob: true})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// A savepoint of job A restored as a new job onto the store of job B
// (which counted other words): the new job's run is exactly once, its
// output in the store starting at the savepoint, and job B's output is
// left out as the job before it.
func TestRunOfANewJobFromAnotherJobsSavepointIsExactlyOnce(t *testing.T) {
	east, west := fileStore(t), fileStore(t)
	if _, err := Run(demofault.With(t.Context(), demofault.Faults{CrashAfter: 10_200}), node(t, east)); !errors.Is(err, ErrCrashed) {
		t.Fatalf("run on east: %v, want ErrCrashed", err)
	}
	_, next := savepointOf(t, east, "a")
	other := node(t, west)
	other.Words = 70 // another job: its output is not job A's
	if res, err := Run(t.Context(), other); err != nil || !res.Check.OK() {
		t.Fatalf("job B on west: %v, %s", err, res.Check)
	}
	start := newJobFrom(t, east, west, "a")
	for i := range 2 { // and again: the base and lineage hold for later runs
		res := mustComplete(t, node(t, west))
		if i == 0 && (res.RestoredID != start || res.StartOffset != next) {
			t.Fatalf("new job's run %+v: want a restore of %s at %d", res, start, next)
		}
		if res.Check.Base.Offset != next || res.Check.OutputTotal != 20_000-next || res.Check.Abandoned == 0 {
			t.Fatalf("run %d of the new job: %s (base %+v), want its output from %d, job B's left out", i+1, res.Check, res.Check.Base, next)
		}
		if !strings.Contains(res.Check.String(), "the job before this one") {
			t.Errorf("verdict %q does not say what it left out", res.Check)
		}
	}
}
