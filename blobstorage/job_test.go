package blobstorage

import (
	"errors"
	"maps"
	"testing"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
	"github.com/tidemark-io/tidemark/checkpoint"
)

// saveJob saves files as completed checkpoint seq of job (a writer's
// Save stamps the store's job when job is "").
func saveJob(t *testing.T, s *Storage, seq uint64, job string, files stateFiles) {
	t.Helper()
	d := record(checkpoint.NewID(seq), checkpoint.StatusCompleted)
	d.JobID = job
	d.StateDirs = writeState(t, s, d.ID, files)
	if err := s.Save(t.Context(), d); err != nil {
		t.Fatalf("Save(%s): %v", d.ID, err)
	}
}

// snapshot returns every object of bs with its content.
func snapshot(t *testing.T, bs blobstore.Blobstore) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, k := range blobstoretest.ListKeys(t, bs, "") {
		out[k] = string(blobstoretest.Get(t, bs, k))
	}
	return out
}

// A savepoint of job A is refused on the store of job B, reading only,
// before the writer role is taken: B is byte for byte what it was. Asked
// for a new job, it is restored as the first checkpoint of one, which
// verifies, and B's next Save carries the new job's id.
func TestSavepointOfAnotherJobIsRefusedBeforeTheWriterRole(t *testing.T) {
	ctx := t.Context()
	bsA, bsB := newMem(), newMem()
	a := newWriter(t, bsA, Options{})
	saveJob(t, a, 1, "", stateFiles{"w0": {"000001.sst": "a1", "MANIFEST": "ma"}})
	if _, err := checkpoint.CreateSavepoint(ctx, a, bsB, "from-a"); err != nil {
		t.Fatal(err)
	}
	jobA, _ := a.LoadSpecific(ctx, checkpoint.NewID(1))
	b := newWriter(t, bsB, Options{})
	for seq := uint64(1); seq <= 3; seq++ {
		saveJob(t, b, seq, "", stateFiles{"w0": {"000001.sst": "b", "MANIFEST": "mb"}})
	}
	jobB, _ := b.LoadSpecific(ctx, checkpoint.NewID(3))
	if jobA.JobID == "" || jobB.JobID == "" || jobA.JobID == jobB.JobID {
		t.Fatalf("jobs %q and %q: want two distinct job ids", jobA.JobID, jobB.JobID)
	}

	before := snapshot(t, bsB)
	rec, err := checkpoint.SavepointRecord(ctx, bsB, "from-a")
	if err != nil {
		t.Fatal(err)
	}
	err = checkpoint.CheckJob(ctx, New(bsB, "", Options{}), rec, checkpoint.RestoreOptions{})
	var m *checkpoint.JobMismatch
	if !errors.As(err, &m) || m.Job != jobA.JobID || m.Store != jobB.JobID {
		t.Fatalf("CheckJob = %v; want a JobMismatch of %s onto %s", err, jobA.JobID, jobB.JobID)
	}
	if after := snapshot(t, bsB); !maps.Equal(before, after) {
		t.Fatal("the refusal changed the store")
	}

	// The restore itself refuses too, under the writer role, saving nothing.
	dst := newWriter(t, bsB, Options{})
	if _, err := checkpoint.RestoreSavepoint(ctx, dst, bsB, "from-a"); !errors.Is(err, checkpoint.ErrOtherJob) {
		t.Fatalf("restore = %v, want ErrOtherJob", err)
	}
	if ids, _ := dst.IDs(ctx); len(ids) != 3 {
		t.Fatalf("after the refused restore the store holds %v", ids)
	}

	id, err := checkpoint.RestoreSavepointWith(ctx, dst, bsB, "from-a", checkpoint.RestoreOptions{NewJob: true})
	if err != nil {
		t.Fatal(err)
	}
	got, err := dst.LoadLatestCompleted(ctx)
	if err != nil || got.ID != id || id != checkpoint.NewID(4) || !got.StartsJob() || got.JobID == jobA.JobID || got.JobID == jobB.JobID {
		t.Fatalf("latest completed %+v, %v: want %s, the start of a new job", got, err, checkpoint.NewID(4))
	}
	if err := dst.Verify(ctx, id); err != nil {
		t.Fatal(err)
	}
	saveJob(t, dst, 5, "", stateFiles{"w0": {"MANIFEST": "m5"}})
	if next, _ := dst.LoadSpecific(ctx, checkpoint.NewID(5)); next.JobID != got.JobID {
		t.Fatalf("the next record is of job %q, want the new job %q", next.JobID, got.JobID)
	}
}
