package blobstorage

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
	"github.com/tidemark-io/tidemark/checkpoint"
)

// newTestWorker returns a Worker on bs with its own local directory.
func newTestWorker(t *testing.T, bs blobstore.Blobstore, slot string) *Worker {
	t.Helper()
	w, err := NewWorker(bs, t.TempDir(), NewWorkerID(slot), Options{Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// writeOwners writes files (owner → path → content, "link:<id>" as in
// writeState) under root/<owner> and returns the state dirs.
func writeOwners(t *testing.T, root string, files stateFiles) map[string]string {
	t.Helper()
	dirs := map[string]string{}
	for owner, fm := range files {
		dirs[owner] = owner
		for p, content := range fm {
			dst := filepath.Join(root, owner, filepath.FromSlash(p))
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				t.Fatal(err)
			}
			if from, ok := strings.CutPrefix(content, "link:"); ok {
				src := filepath.Join(filepath.Dir(root), checkpoint.StateDirName(from), owner, filepath.FromSlash(p))
				if err := os.Link(src, dst); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if err := os.WriteFile(dst, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dirs
}

// savePart writes files as worker w's state of checkpoint id and saves
// its part under epoch.
func savePart(t *testing.T, w *Worker, epoch uint64, id string, files stateFiles) PartStats {
	t.Helper()
	dirs := writeOwners(t, w.StateDir(id), files)
	st, err := w.SavePart(t.Context(), epoch, &checkpoint.CheckpointData{ID: id, StateDirs: dirs})
	if err != nil {
		t.Fatalf("worker %s SavePart(%s): %v", w.ID(), id, err)
	}
	return st
}

func assignment(owners map[*Worker][]string) Assignment {
	a := Assignment{}
	for w, os := range owners {
		for _, o := range os {
			a[o] = w.ID()
		}
	}
	return a
}

func subset(m map[string]string, owners ...string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		for _, o := range owners {
			if strings.HasPrefix(k, o+"/") {
				out[k] = v
			}
		}
	}
	return out
}

func TestWorkersSaveByPartsCommitOnceAndRestorePerWorker(t *testing.T) {
	reads := newReadSpy(newMem())
	bs := newBlobSpy(reads)
	coord := newWriter(t, bs, Options{})
	w1, w2 := newTestWorker(t, bs, "w1"), newTestWorker(t, bs, "w2")
	if err := coord.Assign(assignment(map[*Worker][]string{w1: {"a", "b"}, w2: {"c"}})); err != nil {
		t.Fatal(err)
	}
	id := checkpoint.NewID(1)
	f1 := stateFiles{"a": {"000001.sst": "table a", "MANIFEST": "m a"}, "b": {"x/000002.sst": "table b", "CURRENT": "cur b"}}
	f2 := stateFiles{"c": {"000003.sst": "table c", "OPTIONS": "opts c"}}
	savePart(t, w1, coord.Epoch(), id, f1)
	savePart(t, w2, coord.Epoch(), id, f2)
	reads.requests()
	if err := coord.Save(t.Context(), record(id, checkpoint.StatusCompleted)); err != nil {
		t.Fatalf("Save: %v", err)
	}
	// One GET per owner finds its part.
	for owner, w := range map[string]*Worker{"a": w1, "b": w1, "c": w2} {
		if n := reads.gets[partKey(id, coord.Epoch(), owner, w.ID())]; n != 1 {
			t.Errorf("part of %s read %d times, want once", owner, n)
		}
	}
	rec, err := coord.LoadRecord(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	wantWorkers := map[string]string{"a": w1.ID(), "b": w1.ID(), "c": w2.ID()}
	if !maps.Equal(rec.Workers, wantWorkers) || !maps.Equal(rec.StateDirs, map[string]string{"a": "a", "b": "b", "c": "c"}) {
		t.Fatalf("record workers %v dirs %v", rec.Workers, rec.StateDirs)
	}
	want := flatten(stateFiles{"a": f1["a"], "b": f1["b"], "c": f2["c"]}, nil)
	if got := restoreElsewhere(t, bs, id); !maps.Equal(got, want) {
		t.Fatalf("whole-job restore = %v, want %v", got, want)
	}
	// Private files live under the part's keys, shared ones carry the
	// worker id: nothing under the Storage's own private prefix.
	for _, k := range blobstoretest.ListKeys(t, bs, "") {
		if strings.Contains(k, "/private/") {
			t.Errorf("key %s under the single-process private prefix", k)
		}
	}
	// A replacement for w2 on an empty disk restores only c.
	w2b := newTestWorker(t, bs, "w2")
	if err := w2b.Restore(t.Context(), id, []string{"c"}); err != nil {
		t.Fatal(err)
	}
	if got := readTree(t, w2b.StateDir(id)); !maps.Equal(got, subset(want, "c")) {
		t.Fatalf("worker restore of c = %v", got)
	}
	if err := w2b.Restore(t.Context(), id, []string{"nope"}); err == nil {
		t.Error("Restore of an owner the checkpoint does not have succeeded")
	}
	// No restore pin is left behind.
	if keys := blobstoretest.ListKeys(t, bs, "pins/"); len(keys) != 0 {
		t.Errorf("pins left: %v", keys)
	}
}

func TestSaveCommitsNoPartOfAnotherEpochOrAReplacedWorker(t *testing.T) {
	bs := newMem()
	coord := newWriter(t, bs, Options{})
	w1, w2 := newTestWorker(t, bs, "w1"), newTestWorker(t, bs, "w2")
	a := Assignment{"a": w1.ID(), "b": w2.ID()}
	if err := coord.Assign(a); err != nil {
		t.Fatal(err)
	}
	id1 := checkpoint.NewID(1)
	savePart(t, w1, coord.Epoch(), id1, stateFiles{"a": {"MANIFEST": "a1"}})
	savePart(t, w2, coord.Epoch(), id1, stateFiles{"b": {"MANIFEST": "b1"}})
	if err := coord.Save(t.Context(), record(id1, checkpoint.StatusCompleted)); err != nil {
		t.Fatal(err)
	}
	committed := id1
	noCommit := func(what, id string) {
		t.Helper()
		err := coord.Save(t.Context(), record(id, checkpoint.StatusCompleted))
		if !errors.Is(err, ErrPartMissing) {
			t.Fatalf("%s: Save = %v, want ErrPartMissing", what, err)
		}
		if _, err := coord.LoadRecord(t.Context(), id); !errors.Is(err, checkpoint.ErrNotFound) {
			t.Fatalf("%s: a record was written: %v", what, err)
		}
		if d, _ := coord.LoadLatestCompleted(t.Context()); idOf(d) != committed {
			t.Fatalf("%s: _latest-completed = %s", what, idOf(d))
		}
	}
	id2 := checkpoint.NewID(2)
	// b's part is missing.
	savePart(t, w1, coord.Epoch(), id2, stateFiles{"a": {"MANIFEST": "a2"}})
	noCommit("missing part", id2)
	savePart(t, w2, coord.Epoch(), id2, stateFiles{"b": {"MANIFEST": "b2"}})
	if err := coord.Save(t.Context(), record(id2, checkpoint.StatusCompleted)); err != nil {
		t.Fatalf("Save with every part: %v", err)
	}
	// A new writer takes over: parts under the old epoch are not its.
	coord2 := newWriter(t, bs, Options{})
	if err := coord2.Assign(a); err != nil {
		t.Fatal(err)
	}
	coord = coord2
	id3 := checkpoint.NewID(3)
	savePart(t, w1, coord.Epoch(), id3, stateFiles{"a": {"MANIFEST": "a3"}})
	savePart(t, w2, coord.Epoch()-1, id3, stateFiles{"b": {"MANIFEST": "b3 stale epoch"}})
	committed = id2
	noCommit("part under an older epoch", id3)
	// w2 is replaced by w2b: the zombie's part for the current epoch is
	// not committed, and it cannot overwrite its successor's.
	w2b := newTestWorker(t, bs, "w2")
	a["b"] = w2b.ID()
	if err := coord.Assign(a); err != nil {
		t.Fatal(err)
	}
	savePart(t, w2, coord.Epoch(), id3, stateFiles{"b": {"MANIFEST": "b3 zombie"}})
	noCommit("part by a replaced worker", id3)
	savePart(t, w2b, coord.Epoch(), id3, stateFiles{"b": {"MANIFEST": "b3 live"}})
	if err := coord.Save(t.Context(), record(id3, checkpoint.StatusCompleted)); err != nil {
		t.Fatal(err)
	}
	if got := restoreElsewhere(t, bs, id3); !maps.Equal(got, map[string]string{"a/MANIFEST": "a3", "b/MANIFEST": "b3 live"}) {
		t.Fatalf("restored %v", got)
	}
	// A second SavePart of the same part is refused, uploading nothing.
	dirs := writeOwners(t, w2.StateDir(id3), stateFiles{"b": {"MANIFEST": "b3 again"}})
	if _, err := w2b.SavePart(t.Context(), coord.Epoch(), &checkpoint.CheckpointData{ID: id3, StateDirs: dirs}); err == nil {
		t.Error("a second SavePart of the same part succeeded")
	}
	if got := restoreElsewhere(t, bs, id3); got["b/MANIFEST"] != "b3 live" {
		t.Fatalf("after a refused resave: %v", got)
	}
}

func TestWorkerUploadsSharedFilesOnceAndReusesRestoredOnes(t *testing.T) {
	bs := newBlobSpy(newMem())
	coord := newWriter(t, bs, Options{})
	w := newTestWorker(t, bs, "w")
	if err := coord.Assign(Assignment{"a": w.ID()}); err != nil {
		t.Fatal(err)
	}
	id1, id2, id3 := checkpoint.NewID(1), checkpoint.NewID(2), checkpoint.NewID(3)
	big := strings.Repeat("t", 1000)
	st := savePart(t, w, coord.Epoch(), id1, stateFiles{"a": {"000001.sst": big, "MANIFEST": "m1"}})
	if st.UploadedFiles != 2 || st.ReusedFiles != 0 {
		t.Fatalf("first part: %+v", st)
	}
	if err := coord.Save(t.Context(), record(id1, checkpoint.StatusCompleted)); err != nil {
		t.Fatal(err)
	}
	bs.reset()
	st = savePart(t, w, coord.Epoch(), id2, stateFiles{"a": {"000001.sst": "link:" + id1, "MANIFEST": "m2"}})
	if st.UploadedFiles != 1 || st.ReusedFiles != 1 || st.ReusedBytes != int64(len(big)) {
		t.Fatalf("second part: %+v", st)
	}
	if keys, _ := bs.uploads("shared/"); len(keys) != 0 {
		t.Fatalf("second part uploaded shared %v", keys)
	}
	if err := coord.Save(t.Context(), record(id2, checkpoint.StatusCompleted)); err != nil {
		t.Fatal(err)
	}
	// A fresh worker restores a, then saves a checkpoint hard-linking the
	// restored table: referenced, not uploaded.
	wb := newTestWorker(t, bs, "w")
	if err := wb.Restore(t.Context(), id2, []string{"a"}); err != nil {
		t.Fatal(err)
	}
	if err := coord.Assign(Assignment{"a": wb.ID()}); err != nil {
		t.Fatal(err)
	}
	bs.reset()
	st = savePart(t, wb, coord.Epoch(), id3, stateFiles{"a": {"000001.sst": "link:" + id2, "MANIFEST": "m3"}})
	if st.UploadedFiles != 1 || st.ReusedFiles != 1 {
		t.Fatalf("part after restore: %+v", st)
	}
	if err := coord.Save(t.Context(), record(id3, checkpoint.StatusCompleted)); err != nil {
		t.Fatal(err)
	}
	if got := restoreElsewhere(t, bs, id3); !maps.Equal(got, map[string]string{"a/000001.sst": big, "a/MANIFEST": "m3"}) {
		t.Fatalf("restored %v", got)
	}
}

// Rescale: a checkpoint saved by two workers restores on three (owners
// split) and on one (merged), by a single process too; the next Save
// records the new assignment.
func TestWorkersRescale(t *testing.T) {
	bs := newMem()
	coord := newWriter(t, bs, Options{})
	w1, w2 := newTestWorker(t, bs, "w1"), newTestWorker(t, bs, "w2")
	if err := coord.Assign(assignment(map[*Worker][]string{w1: {"a", "b"}, w2: {"c", "d"}})); err != nil {
		t.Fatal(err)
	}
	all := stateFiles{}
	for _, o := range []string{"a", "b", "c", "d"} {
		all[o] = map[string]string{"000001.sst": "table " + o, "MANIFEST": "m " + o}
	}
	id1 := checkpoint.NewID(1)
	savePart(t, w1, coord.Epoch(), id1, stateFiles{"a": all["a"], "b": all["b"]})
	savePart(t, w2, coord.Epoch(), id1, stateFiles{"c": all["c"], "d": all["d"]})
	if err := coord.Save(t.Context(), record(id1, checkpoint.StatusCompleted)); err != nil {
		t.Fatal(err)
	}
	want := flatten(all, nil)

	// Three workers: a; b, c; d.
	n1, n2, n3 := newTestWorker(t, bs, "w1"), newTestWorker(t, bs, "w2"), newTestWorker(t, bs, "w3")
	split := map[*Worker][]string{n1: {"a"}, n2: {"b", "c"}, n3: {"d"}}
	for w, owners := range split {
		if err := w.Restore(t.Context(), id1, owners); err != nil {
			t.Fatal(err)
		}
		if got := readTree(t, w.StateDir(id1)); !maps.Equal(got, subset(want, owners...)) {
			t.Fatalf("worker of %v restored %v", owners, got)
		}
	}
	// One worker: all four.
	one := newTestWorker(t, bs, "solo")
	if err := one.Restore(t.Context(), id1, []string{"a", "b", "c", "d"}); err != nil {
		t.Fatal(err)
	}
	if got := readTree(t, one.StateDir(id1)); !maps.Equal(got, want) {
		t.Fatalf("merged restore %v", got)
	}

	// A new writer (the job resumed) saves the next checkpoint with the
	// three workers; each changes its owners' MANIFEST and links the table.
	coord2 := newWriter(t, bs, Options{})
	b := assignment(split)
	if err := coord2.Assign(b); err != nil {
		t.Fatal(err)
	}
	id2 := checkpoint.NewID(2)
	want2 := map[string]string{}
	for w, owners := range split {
		files := stateFiles{}
		for _, o := range owners {
			files[o] = map[string]string{"000001.sst": "link:" + id1, "MANIFEST": "m2 " + o}
			want2[o+"/000001.sst"], want2[o+"/MANIFEST"] = "table "+o, "m2 "+o
		}
		if st := savePart(t, w, coord2.Epoch(), id2, files); st.ReusedFiles != len(owners) {
			t.Errorf("worker of %v reused %d restored tables, want %d", owners, st.ReusedFiles, len(owners))
		}
	}
	if err := coord2.Save(t.Context(), record(id2, checkpoint.StatusCompleted)); err != nil {
		t.Fatal(err)
	}
	rec, err := coord2.LoadRecord(t.Context(), id2)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(rec.Workers, b) {
		t.Fatalf("record workers %v, want %v", rec.Workers, b)
	}
	if got := restoreElsewhere(t, bs, id2); !maps.Equal(got, want2) {
		t.Fatalf("restored %v, want %v", got, want2)
	}
}

// Parts of a checkpoint that never committed are leftovers GC removes
// after the grace period (not before); the files committed checkpoints'
// parts reference stay.
func TestGCRemovesUncommittedPartsAfterGraceAndKeepsCommittedOnes(t *testing.T) {
	bs := newMem()
	coord := newWriter(t, bs, Options{Keep: 1})
	w := newTestWorker(t, bs, "w")
	if err := coord.Assign(Assignment{"a": w.ID(), "b": w.ID()}); err != nil {
		t.Fatal(err)
	}
	id1, id2, id3 := checkpoint.NewID(1), checkpoint.NewID(2), checkpoint.NewID(3)
	savePart(t, w, coord.Epoch(), id1, stateFiles{"a": {"000001.sst": "t1", "MANIFEST": "m1"}, "b": {"MANIFEST": "b1"}})
	if err := coord.Save(t.Context(), record(id1, checkpoint.StatusCompleted)); err != nil {
		t.Fatal(err)
	}
	savePart(t, w, coord.Epoch(), id2, stateFiles{"a": {"000001.sst": "link:" + id1, "000002.sst": "t2", "MANIFEST": "m2"}, "b": {"MANIFEST": "b2"}})
	if err := coord.Save(t.Context(), record(id2, checkpoint.StatusCompleted)); err != nil {
		t.Fatal(err)
	}
	// id3: only some parts, never committed; its new table is unreferenced.
	dirs := writeOwners(t, w.StateDir(id3), stateFiles{"a": {"000001.sst": "link:" + id2, "000003.sst": "t3", "MANIFEST": "m3"}})
	if _, err := w.SavePart(t.Context(), coord.Epoch(), &checkpoint.CheckpointData{ID: id3, StateDirs: dirs}); err != nil {
		t.Fatal(err)
	}
	if err := coord.Save(t.Context(), record(id3, checkpoint.StatusCompleted)); !errors.Is(err, ErrPartMissing) {
		t.Fatalf("Save = %v, want ErrPartMissing", err)
	}
	leftovers := func() []string {
		var out []string
		for _, k := range blobstoretest.ListKeys(t, bs, "") {
			if strings.HasPrefix(k, "checkpoints/"+id3+"/") || strings.HasPrefix(k, "shared/a/"+id3+"-") {
				out = append(out, k)
			}
		}
		return out
	}
	if n := len(leftovers()); n != 3 { // part, MANIFEST, 000003.sst
		t.Fatalf("leftovers of %s: %v", id3, leftovers())
	}
	if _, err := coord.GC(t.Context(), GCOptions{}); err != nil {
		t.Fatal(err)
	}
	if len(leftovers()) != 3 {
		t.Fatalf("GC within the grace period removed parts of %s: %v left", id3, leftovers())
	}
	rep, err := coord.GC(t.Context(), GCOptions{Now: time.Now().Add(2 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if l := leftovers(); len(l) != 0 {
		t.Fatalf("GC after the grace period left %v (report %+v)", l, rep)
	}
	if !slices.Contains(rep.Dropped, id3) || !slices.Equal(rep.Retained, []string{id2}) {
		t.Fatalf("report retained %v dropped %v", rep.Retained, rep.Dropped)
	}
	// id2 (kept) still restores, including the table id1's part uploaded.
	want := map[string]string{"a/000001.sst": "t1", "a/000002.sst": "t2", "a/MANIFEST": "m2", "b/MANIFEST": "b2"}
	if got := restoreElsewhere(t, bs, id2); !maps.Equal(got, want) {
		t.Fatalf("restored %v", got)
	}
}

// A worker's remembered upload that the writer's GC deleted since (a part
// that never committed, older than the grace period) is never committed:
// Save checks the files parts reuse that it has not committed itself.
func TestSaveRefusesAPartReusingAFileGCDeleted(t *testing.T) {
	bs := newMem()
	coord := newWriter(t, bs, Options{})
	w := newTestWorker(t, bs, "w")
	if err := coord.Assign(Assignment{"a": w.ID()}); err != nil {
		t.Fatal(err)
	}
	id1, id2 := checkpoint.NewID(1), checkpoint.NewID(2)
	savePart(t, w, coord.Epoch(), id1, stateFiles{"a": {"000001.sst": "t1", "MANIFEST": "m1"}})
	// id1 is never committed; GC after the grace period deletes its table.
	if _, err := coord.GC(t.Context(), GCOptions{Now: time.Now().Add(2 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if keys := blobstoretest.ListKeys(t, bs, "shared/"); len(keys) != 0 {
		t.Fatalf("shared left: %v", keys)
	}
	st := savePart(t, w, coord.Epoch(), id2, stateFiles{"a": {"000001.sst": "link:" + id1, "MANIFEST": "m2"}})
	if st.ReusedFiles != 1 {
		t.Fatalf("the worker did not reuse its remembered table (the case under test): %+v", st)
	}
	if err := coord.Save(t.Context(), record(id2, checkpoint.StatusCompleted)); !errors.Is(err, ErrPartMissing) {
		t.Fatalf("Save = %v, want ErrPartMissing", err)
	}
	if d, _ := coord.Load(t.Context()); d != nil {
		t.Fatalf("a checkpoint was committed: %s", d.ID)
	}
}

func TestWorkerAPIRefusesBadInput(t *testing.T) {
	bs := newMem()
	for _, id := range []string{"", ".", "..", "a/b", "a b", strings.Repeat("x", 65), "ü"} {
		if err := ValidateWorkerID(id); err == nil {
			t.Errorf("ValidateWorkerID(%q) = nil", id)
		}
		if _, err := NewWorker(bs, t.TempDir(), id, Options{}); err == nil {
			t.Errorf("NewWorker(%q) succeeded", id)
		}
	}
	for _, id := range []string{"w", "worker-2", NewWorkerID("worker-2"), strings.Repeat("x", 64), "a.b_c-D9"} {
		if err := ValidateWorkerID(id); err != nil {
			t.Errorf("ValidateWorkerID(%q) = %v", id, err)
		}
	}
	if a, b := NewWorkerID("s"), NewWorkerID("s"); a == b || !strings.HasPrefix(a, "s-") {
		t.Errorf("NewWorkerID: %q, %q", a, b)
	}
	coord := newWriter(t, bs, Options{})
	if err := coord.Assign(Assignment{"a": "w1"}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []Assignment{{"a": "bad id"}, {"a/b": "w"}, {"": "w"}} {
		if err := coord.Assign(bad); err == nil {
			t.Errorf("Assign(%v) = nil", bad)
		}
	}
	// The assignment in force is unchanged: a's part is still expected.
	if err := coord.Save(t.Context(), record(checkpoint.NewID(1), checkpoint.StatusCompleted)); !errors.Is(err, ErrPartMissing) {
		t.Errorf("Save after refused Assigns = %v, want ErrPartMissing", err)
	}
	w := newTestWorker(t, bs, "w")
	good := &checkpoint.CheckpointData{ID: checkpoint.NewID(1), StateDirs: map[string]string{"a": "a"}}
	for name, call := range map[string]func() error{
		"epoch 0":  func() error { _, err := w.SavePart(t.Context(), 0, good); return err },
		"nil data": func() error { _, err := w.SavePart(t.Context(), 1, nil); return err },
		"bad id":   func() error { _, err := w.SavePart(t.Context(), 1, &checkpoint.CheckpointData{ID: "../x"}); return err },
		"bad dirs": func() error {
			_, err := w.SavePart(t.Context(), 1, &checkpoint.CheckpointData{ID: good.ID, StateDirs: map[string]string{"a": "../x"}})
			return err
		},
		"no state dir":   func() error { _, err := w.SavePart(t.Context(), 1, good); return err },
		"restore bad id": func() error { return w.Restore(t.Context(), "../x", []string{"a"}) },
	} {
		if err := call(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if keys := blobstoretest.ListKeys(t, bs, "checkpoints/"); len(keys) != 0 {
		t.Errorf("refused calls wrote %v", keys)
	}
}

// After the epoch changes, a worker reuses only the uploads a committed
// checkpoint names: a table it uploaded for the fenced writer's
// checkpoint, which never committed, is uploaded again under the new
// epoch, while the committed one is referenced.
func TestWorkerForgetsUncommittedUploadsWhenTheEpochChanges(t *testing.T) {
	bs := newMem()
	coord := newWriter(t, bs, Options{})
	w := newTestWorker(t, bs, "w")
	if err := coord.Assign(Assignment{"a": w.ID()}); err != nil {
		t.Fatal(err)
	}
	id1, id2, id3 := checkpoint.NewID(1), checkpoint.NewID(2), checkpoint.NewID(3)
	savePart(t, w, coord.Epoch(), id1, stateFiles{"a": {"000001.sst": "t1", "MANIFEST": "m1"}})
	if err := coord.Save(t.Context(), record(id1, checkpoint.StatusCompleted)); err != nil {
		t.Fatal(err)
	}
	// The barrier of id2 reaches the worker, then the writer is replaced
	// before it commits.
	savePart(t, w, coord.Epoch(), id2, stateFiles{"a": {"000001.sst": "link:" + id1, "000002.sst": "t2", "MANIFEST": "m2"}})
	coord2 := newWriter(t, bs, Options{})
	if err := coord2.Assign(Assignment{"a": w.ID()}); err != nil {
		t.Fatal(err)
	}
	st := savePart(t, w, coord2.Epoch(), id3, stateFiles{"a": {"000001.sst": "link:" + id2, "000002.sst": "link:" + id2, "MANIFEST": "m3"}})
	if st.ReusedFiles != 1 || st.UploadedFiles != 2 {
		t.Fatalf("part under the new epoch: %+v, want 000001.sst reused, 000002.sst and MANIFEST uploaded", st)
	}
	if err := coord2.Save(t.Context(), record(id3, checkpoint.StatusCompleted)); err != nil {
		t.Fatal(err)
	}
	rec, err := coord2.LoadRecord(t.Context(), id3)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rec.Files["a"] {
		if f.Path == "000002.sst" && !rec.Introduced("a", f) {
			t.Errorf("000002.sst references %s, uploaded for the fenced writer", f.Key)
		}
	}
}

// partRecorder is a PartObserver that keeps what it hears.
type partRecorder struct {
	nopObserver
	parts []PartStats
}

func (r *partRecorder) SavedPart(st PartStats) { r.parts = append(r.parts, st) }

// A worker's Observer hears of each SavePart when it is a PartObserver:
// what the part uploaded and reused, and the error of a refused one.
func TestWorkerReportsItsPartsToAPartObserver(t *testing.T) {
	bs := newMem()
	coord := newWriter(t, bs, Options{})
	obs := &partRecorder{}
	w, err := NewWorker(bs, t.TempDir(), NewWorkerID("w1"), Options{Concurrency: 2, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	if err := coord.Assign(assignment(map[*Worker][]string{w: {"a"}})); err != nil {
		t.Fatal(err)
	}
	id := checkpoint.NewID(1)
	got := savePart(t, w, coord.Epoch(), id, stateFiles{"a": {"000001.sst": "table a", "MANIFEST": "m a"}})
	// A second SavePart of the same part is refused, and heard of.
	_, again := w.SavePart(t.Context(), coord.Epoch(), &checkpoint.CheckpointData{ID: id, StateDirs: map[string]string{"a": "a"}})
	if again == nil {
		t.Fatal("a second SavePart of the same part succeeded")
	}
	if len(obs.parts) != 2 {
		t.Fatalf("the observer heard of %d parts, want 2: %+v", len(obs.parts), obs.parts)
	}
	first := obs.parts[0]
	if first.ID != id || first.Epoch != coord.Epoch() || first.Owners != 1 || first.UploadedFiles != 2 ||
		first.UploadedBytes != int64(len("table a")+len("m a")) || first.Requests == 0 || first.Err != nil {
		t.Errorf("heard %+v of the first part", first)
	}
	if first.UploadedFiles != got.UploadedFiles || first.UploadedBytes != got.UploadedBytes || got.Err != nil {
		t.Errorf("heard %+v, SavePart returned %+v", first, got)
	}
	if e := obs.parts[1].Err; e == nil || e.Error() != again.Error() {
		t.Errorf("the refused part was heard of without its error: %+v", obs.parts[1])
	}
}

// A part document has its own key class; the files of a part are private
// or shared like a single process's.
func TestKeyClassOfParts(t *testing.T) {
	id, w := checkpoint.NewID(1), NewWorkerID("w1")
	for key, want := range map[string]string{
		partKey(id, 3, "a", w):                           "part",
		workerPrivateKey(id, 3, "a", w, "MANIFEST"):      "private",
		workerPrivateKey(id, 3, "a", w, "x/y/part.json"): "private",
		workerPrivateKey(id, 3, "a", w, "part.json"):     "private",
		workerSharedKey(id, 3, "a", w, "000001.sst"):     "shared",
		recordKey(id): "record",
	} {
		if got := KeyClass(key); got != want {
			t.Errorf("KeyClass(%q) = %q, want %q", key, got, want)
		}
	}
}
