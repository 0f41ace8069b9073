// Package storagetest is the behaviour suite every checkpoint.Storage
// implementation passes: FileStorage, and BlobStorage on every Blobstore.
//
// # Use
//
//	func TestMyStorage(t *testing.T) {
//		storagetest.Run(t, func(t *testing.T) checkpoint.Storage {
//			return newEmptyStorage(t) // ready to write (a BlobStorage has called Acquire)
//		})
//	}
//
// # What it checks
//
// Save, Load, LoadLatestCompleted, LoadSpecific and UpdateStatus
// semantics: nil with no error when empty, round trip of every record
// field, latest of any status versus latest completed, empty status as
// completed, ErrNotFound for missing ids, pointers that never move
// backwards, state directories that checkpoint.Materialize makes
// present under StateDir, and job identity (checkpoint.JobToSave): one
// job id stamped on every record, another job's record refused unless
// it starts a job.
package storagetest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/checkpoint"
)

// Run runs the suite. newStorage returns a new, empty Storage ready for
// writes, for each subtest; the subtests run in parallel.
func Run(t *testing.T, newStorage func(t *testing.T) checkpoint.Storage) {
	t.Helper()
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, checkpoint.Storage)
	}{
		{"EmptyStorageLoadsNil", testEmpty},
		{"SaveThenLoadRoundTripsEveryField", testRoundTrip},
		{"LatestIsNewestOfAnyStatus", testLatestAnyStatus},
		{"LatestCompletedIsNilWhenOnlyPrepared", testOnlyPrepared},
		{"EmptyStatusCountsAsCompleted", testEmptyStatus},
		{"UpdateStatusPromotesPrepared", testPromote},
		{"MissingIDIsErrNotFound", testMissing},
		{"LatestCompletedNeverMovesBackwards", testNeverBackwards},
		{"StateDirsAreMaterialized", testStateDirs},
		{"StateDirOfInvalidIDIsEmpty", testInvalidStateDir},
		{"EveryRecordCarriesTheStoresJobID", testJobStamped},
		{"RecordOfAnotherJobIsRefused", testOtherJobRefused},
		{"RecordStartingAJobChangesTheStoresJob", testJobStart},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // each subtest has a Storage of its own
			tc.fn(t, newStorage(t))
		})
	}
}

var ctx = context.Background()

func rec(seq uint64, st checkpoint.Status) *checkpoint.CheckpointData {
	id := checkpoint.NewID(seq)
	return &checkpoint.CheckpointData{
		ID:        id,
		Timestamp: time.Date(2026, 7, 19, 10, 0, 0, 0, time.UTC),
		Operators: map[string][]byte{"0": []byte("op-" + id)},
		Source:    map[string][]byte{checkpoint.SourceOffsetsKey: []byte("off-" + id)},
		Status:    st,
		TxnID:     "txn-" + id,
	}
}

func save(t *testing.T, s checkpoint.Storage, d *checkpoint.CheckpointData) {
	t.Helper()
	if err := s.Save(ctx, d); err != nil {
		t.Fatalf("Save(%s): %v", d.ID, err)
	}
}

func idOf(d *checkpoint.CheckpointData) string {
	if d == nil {
		return "<nil>"
	}
	return d.ID
}

func wantIDs(t *testing.T, s checkpoint.Storage, latest, done string) {
	t.Helper()
	l, err := s.Load(ctx)
	if err != nil || idOf(l) != latest {
		t.Errorf("Load = %s, %v; want %s", idOf(l), err, latest)
	}
	c, err := s.LoadLatestCompleted(ctx)
	if err != nil || idOf(c) != done {
		t.Errorf("LoadLatestCompleted = %s, %v; want %s", idOf(c), err, done)
	}
	if c != nil && !c.Completed() {
		t.Errorf("LoadLatestCompleted returned status %q", c.Status)
	}
}

func testEmpty(t *testing.T, s checkpoint.Storage) {
	wantIDs(t, s, "<nil>", "<nil>")
}

func testRoundTrip(t *testing.T, s checkpoint.Storage) {
	want := rec(1, checkpoint.StatusCompleted)
	want.StateDirs = map[string]string{"w0": "w0", "w1": "nested/w1"}
	want.JobID = "job-roundtrip"
	writeFiles(t, s, want, map[string]string{"w0/a.sst": "a", "nested/w1/MANIFEST": "m"})
	save(t, s, want)
	for name, load := range map[string]func() (*checkpoint.CheckpointData, error){
		"Load":                func() (*checkpoint.CheckpointData, error) { return s.Load(ctx) },
		"LoadLatestCompleted": func() (*checkpoint.CheckpointData, error) { return s.LoadLatestCompleted(ctx) },
		"LoadSpecific":        func() (*checkpoint.CheckpointData, error) { return s.LoadSpecific(ctx, want.ID) },
	} {
		got, err := load()
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %+v, %v; want %+v", name, got, err, want)
		}
	}
}

func testLatestAnyStatus(t *testing.T, s checkpoint.Storage) {
	save(t, s, rec(1, checkpoint.StatusCompleted))
	save(t, s, rec(2, checkpoint.StatusPrepared))
	wantIDs(t, s, checkpoint.NewID(2), checkpoint.NewID(1))
}

func testOnlyPrepared(t *testing.T, s checkpoint.Storage) {
	save(t, s, rec(1, checkpoint.StatusPrepared))
	wantIDs(t, s, checkpoint.NewID(1), "<nil>")
}

func testEmptyStatus(t *testing.T, s checkpoint.Storage) {
	save(t, s, rec(1, ""))
	wantIDs(t, s, checkpoint.NewID(1), checkpoint.NewID(1))
}

func testPromote(t *testing.T, s checkpoint.Storage) {
	save(t, s, rec(1, checkpoint.StatusCompleted))
	save(t, s, rec(2, checkpoint.StatusPrepared))
	if err := s.UpdateStatus(ctx, checkpoint.NewID(2), checkpoint.StatusCompleted); err != nil {
		t.Fatal(err)
	}
	wantIDs(t, s, checkpoint.NewID(2), checkpoint.NewID(2))
	d, err := s.LoadSpecific(ctx, checkpoint.NewID(2))
	if err != nil || d.Status != checkpoint.StatusCompleted || d.TxnID != "txn-"+d.ID {
		t.Errorf("LoadSpecific after promotion = %+v, %v", d, err)
	}
}

func testMissing(t *testing.T, s checkpoint.Storage) {
	save(t, s, rec(1, checkpoint.StatusCompleted))
	missing := checkpoint.NewID(7)
	if _, err := s.LoadSpecific(ctx, missing); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Errorf("LoadSpecific(missing) = %v, want ErrNotFound", err)
	}
	if err := s.UpdateStatus(ctx, missing, checkpoint.StatusCompleted); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Errorf("UpdateStatus(missing) = %v, want ErrNotFound", err)
	}
	if _, err := s.LoadSpecific(ctx, "../escape"); !errors.Is(err, checkpoint.ErrInvalidID) {
		t.Errorf("LoadSpecific(invalid) = %v, want ErrInvalidID", err)
	}
}

func testNeverBackwards(t *testing.T, s checkpoint.Storage) {
	save(t, s, rec(1, checkpoint.StatusPrepared))
	save(t, s, rec(2, checkpoint.StatusCompleted))
	// Promoting an older checkpoint leaves both pointers where they are.
	if err := s.UpdateStatus(ctx, checkpoint.NewID(1), checkpoint.StatusCompleted); err != nil {
		t.Fatal(err)
	}
	wantIDs(t, s, checkpoint.NewID(2), checkpoint.NewID(2))
	// Saving an older id may be refused (BlobStorage) or accepted
	// (FileStorage); either way the pointers stay.
	_ = s.Save(ctx, rec(0, checkpoint.StatusCompleted))
	wantIDs(t, s, checkpoint.NewID(2), checkpoint.NewID(2))
}

func testStateDirs(t *testing.T, s checkpoint.Storage) {
	d := rec(1, checkpoint.StatusCompleted)
	d.StateDirs = map[string]string{"w0": "w0"}
	files := map[string]string{"w0/000001.sst": "table", "w0/sub/MANIFEST": "manifest"}
	writeFiles(t, s, d, files)
	save(t, s, d)
	if err := checkpoint.Materialize(ctx, s, d); err != nil {
		t.Fatal(err)
	}
	for p, want := range files {
		got, err := os.ReadFile(filepath.Join(s.StateDir(d.ID), filepath.FromSlash(p)))
		if err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", p, got, err, want)
		}
	}
}

func testInvalidStateDir(t *testing.T, s checkpoint.Storage) {
	for _, id := range []string{"", "..", "a/b", ".hidden"} {
		if got := s.StateDir(id); got != "" {
			t.Errorf("StateDir(%q) = %q, want \"\"", id, got)
		}
	}
}

// writeFiles creates files (slash paths relative to StateDir(d.ID)).
func writeFiles(t *testing.T, s checkpoint.Storage, d *checkpoint.CheckpointData, files map[string]string) {
	t.Helper()
	for _, rel := range d.StateDirs {
		if err := os.MkdirAll(filepath.Join(s.StateDir(d.ID), filepath.FromSlash(rel)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for p, c := range files {
		dst := filepath.Join(s.StateDir(d.ID), filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func testJobStamped(t *testing.T, s checkpoint.Storage) {
	first := rec(1, checkpoint.StatusCompleted)
	save(t, s, first)
	if first.JobID != "" {
		t.Fatalf("Save changed the caller's record: job id %q", first.JobID)
	}
	got, err := s.LoadSpecific(ctx, first.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.ValidateJobID(got.JobID); err != nil {
		t.Fatalf("the first record of a store got no valid job id: %v", err)
	}
	save(t, s, rec(2, checkpoint.StatusPrepared))
	if err := s.UpdateStatus(ctx, checkpoint.NewID(2), checkpoint.StatusCompleted); err != nil {
		t.Fatal(err)
	}
	save(t, s, rec(3, checkpoint.StatusCompleted))
	for seq := uint64(2); seq <= 3; seq++ {
		d, err := s.LoadSpecific(ctx, checkpoint.NewID(seq))
		if err != nil || d.JobID != got.JobID {
			t.Errorf("record %d: job %q, %v; want the store's %q", seq, d.JobID, err, got.JobID)
		}
	}
}

func testOtherJobRefused(t *testing.T, s checkpoint.Storage) {
	mine := rec(1, checkpoint.StatusCompleted)
	mine.JobID = "job-mine"
	save(t, s, mine)
	other := rec(2, checkpoint.StatusCompleted)
	other.JobID = "job-other"
	err := s.Save(ctx, other)
	var m *checkpoint.JobMismatch
	if !errors.Is(err, checkpoint.ErrOtherJob) || !errors.As(err, &m) || m.Job != "job-other" || m.Store != "job-mine" {
		t.Fatalf("Save of another job's record = %v; want a JobMismatch of job-other onto job-mine", err)
	}
	wantIDs(t, s, mine.ID, mine.ID)
}

func testJobStart(t *testing.T, s checkpoint.Storage) {
	mine := rec(1, checkpoint.StatusCompleted)
	mine.JobID = "job-old"
	save(t, s, mine)
	start := rec(2, checkpoint.StatusCompleted)
	start.JobID = "job-new"
	start.Source[checkpoint.JobStartKey] = []byte("job-new")
	save(t, s, start)
	save(t, s, rec(3, checkpoint.StatusCompleted))
	d, err := s.LoadSpecific(ctx, checkpoint.NewID(3))
	if err != nil || d.JobID != "job-new" {
		t.Fatalf("the record after a job start: job %q, %v; want job-new", d.JobID, err)
	}
}
