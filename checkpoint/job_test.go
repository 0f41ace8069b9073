package checkpoint

import (
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidemark-io/tidemark/blobstore/memstore"
)

// otherJobStore is a FileStorage holding two completed checkpoints of job
// "job-other", the second newer than sourceStorage's.
func otherJobStore(t *testing.T) *FileStorage {
	t.Helper()
	dst := NewFileStorage(t.TempDir())
	for seq := uint64(4); seq <= 5; seq++ {
		d := record(NewID(seq), StatusCompleted)
		d.JobID = "job-other"
		mustSave(t, dst, d)
	}
	return dst
}

func TestNewJobIDsAreValidAndDistinct(t *testing.T) {
	a, b := NewJobID(), NewJobID()
	if a == b {
		t.Fatalf("two new job ids are both %q", a)
	}
	for _, id := range []string{a, b} {
		if err := ValidateJobID(id); err != nil {
			t.Errorf("NewJobID() = %q: %v", id, err)
		}
	}
	for _, bad := range []string{"", "a/b", "a b", "../x", strings.Repeat("j", 129)} {
		if ValidateJobID(bad) == nil {
			t.Errorf("ValidateJobID(%q) = nil, want an error", bad)
		}
	}
}

// A savepoint of another job than the checkpoints a store holds is
// refused, saying whose it is, and the store's directory is left byte for
// byte as it was.
func TestRestoreSavepointOfAnotherJobIsRefusedWithTheStoreUnchanged(t *testing.T) {
	ctx := t.Context()
	src, bs := sourceStorage(t), memstore.New()
	if _, err := CreateSavepoint(ctx, src, bs, "sp"); err != nil {
		t.Fatal(err)
	}
	dst := otherJobStore(t)
	before := treeFiles(t, dst.Dir())

	rec, err := SavepointRecord(ctx, bs, "sp")
	if err != nil {
		t.Fatal(err)
	}
	if rec.JobID != "job-test" {
		t.Fatalf("the savepoint's record carries job %q, want the source's job-test", rec.JobID)
	}
	err = CheckJob(ctx, dst, rec, RestoreOptions{})
	var m *JobMismatch
	if !errors.As(err, &m) || !errors.Is(err, ErrOtherJob) || m.Job != "job-test" || m.Store != "job-other" {
		t.Fatalf("CheckJob = %v; want a JobMismatch of job-test onto job-other", err)
	}

	_, err = RestoreSavepoint(ctx, dst, bs, "sp")
	if !errors.As(err, &m) || m.Job != "job-test" || m.Store != "job-other" {
		t.Fatalf("restore of another job's savepoint = %v; want a JobMismatch naming both jobs", err)
	}
	for _, s := range []string{"job-test", "job-other"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("refusal %q does not name %s", err, s)
		}
	}
	if after := treeFiles(t, dst.Dir()); !maps.Equal(before, after) {
		t.Fatalf("the refused restore changed the store:\nbefore %v\nafter  %v", before, after)
	}
}

// Asked for a new job, the same restore starts one: a new job id, a new
// lineage after the store's checkpoints, marked as the job's start, and
// every later record of the store carries the new id.
func TestRestoreSavepointOfAnotherJobAsANewJob(t *testing.T) {
	ctx := t.Context()
	src, bs := sourceStorage(t), memstore.New()
	orig, err := CreateSavepoint(ctx, src, bs, "sp")
	if err != nil {
		t.Fatal(err)
	}
	dst := otherJobStore(t)
	rec, _ := SavepointRecord(ctx, bs, "sp")
	if err := CheckJob(ctx, dst, rec, RestoreOptions{NewJob: true}); err != nil {
		t.Fatalf("CheckJob with NewJob: %v", err)
	}
	id, err := RestoreSavepointWith(ctx, dst, bs, "sp", RestoreOptions{NewJob: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := NewID(6); id != want {
		t.Fatalf("restored as %s, want %s, after the store's checkpoints", id, want)
	}
	got, err := dst.LoadLatestCompleted(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != id || got.JobID == "" || got.JobID == "job-test" || got.JobID == "job-other" || !got.StartsJob() {
		t.Fatalf("latest completed %s of job %q (starts a job: %v); want %s of a new job, marked as its start", got.ID, got.JobID, got.StartsJob(), id)
	}
	if from := string(got.Source[RestoredFromKey]); from != orig {
		t.Errorf("restored from %q, want the savepoint's %s", from, orig)
	}
	next := record(NewID(7), StatusCompleted)
	next.JobID = ""
	mustSave(t, dst, next)
	if d, _ := dst.LoadSpecific(ctx, next.ID); d.JobID != got.JobID || d.StartsJob() {
		t.Errorf("the next record: job %q (starts a job: %v), want %q", d.JobID, d.StartsJob(), got.JobID)
	}
	// The old job's savepoint is now another job's too.
	if _, err := RestoreSavepoint(ctx, dst, bs, "sp"); !errors.Is(err, ErrOtherJob) {
		t.Errorf("restoring the old job's savepoint again = %v, want ErrOtherJob", err)
	}
}

// Onto a store that holds no checkpoint (another region) a savepoint
// keeps its job: the store becomes that job's.
func TestRestoreSavepointIntoAnEmptyStoreKeepsItsJob(t *testing.T) {
	ctx := t.Context()
	src, bs := sourceStorage(t), memstore.New()
	if _, err := CreateSavepoint(ctx, src, bs, "sp"); err != nil {
		t.Fatal(err)
	}
	dst := NewFileStorage(t.TempDir())
	id, err := RestoreSavepoint(ctx, dst, bs, "sp")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := dst.LoadSpecific(ctx, id)
	if got.JobID != "job-test" || got.StartsJob() {
		t.Fatalf("restored into an empty store as job %q (starts a job: %v), want job-test", got.JobID, got.StartsJob())
	}
}

// A savepoint written before job ids existed (its record has none) is
// restorable onto any store, and takes the store's job.
func TestRestoreSavepointWithoutAJobIDIsAccepted(t *testing.T) {
	ctx := t.Context()
	src, bs := sourceStorage(t), memstore.New()
	// Make the source's latest record one from before job ids.
	p := filepath.Join(src.Dir(), NewID(2)+recordExt)
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "job_id")
	raw, _ = json.Marshal(m)
	if err := os.WriteFile(p, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := CreateSavepoint(ctx, src, bs, "old"); err != nil {
		t.Fatal(err)
	}
	if rec, _ := SavepointRecord(ctx, bs, "old"); rec.JobID != "" {
		t.Fatalf("the old savepoint carries job %q", rec.JobID)
	}
	dst := otherJobStore(t)
	id, err := RestoreSavepoint(ctx, dst, bs, "old")
	if err != nil {
		t.Fatalf("restore of a savepoint without a job id: %v", err)
	}
	if got, _ := dst.LoadSpecific(ctx, id); got.JobID != "job-other" {
		t.Fatalf("restored as job %q, want the store's job-other", got.JobID)
	}
}
