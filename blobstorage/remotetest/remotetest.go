// Package remotetest is the behaviour suite of blobstorage.Storage with
// state in remote mode (UseRemote): real Pebble state through
// state.Store, on whatever Blobstore the caller gives (memstore in unit
// tests, MinIO in the integration tests).
//
// It checks the ownership hand-off (a checkpoint uploads only the local
// part and records the remote objects), failover onto an empty node
// (restore, open, read at once), fencing (a zombie's objects are never
// referenced by its successor's checkpoints, its Save fails with
// checkpoint.ErrFenced), GC (unreferenced objects go after the grace
// period, referenced, pinned and live ones stay, a GC that is not the
// writer leaves the live writer's generation alone) and verify (names a
// missing object).
package remotetest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/state"
)

// The state's view is what remote mode takes; state cannot say so
// itself without importing blobstorage, which sits above it.
var _ blobstorage.RemoteState = state.RemoteView{}

// Run runs every scenario, in parallel; newStore returns a new, empty
// Blobstore for each (it may be a prefix of a shared bucket, but no two
// scenarios may share keys) and must be safe to call concurrently.
func Run(t *testing.T, newStore func(t *testing.T) blobstore.Blobstore) {
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, blobstore.Blobstore)
	}{
		{"HandOffAndFailover", HandOffAndFailover},
		{"ZombieObjectsNeverReferenced", ZombieObjectsNeverReferenced},
		{"ZombieSaveInFlightDuringTakeover", ZombieSaveInFlightDuringTakeover},
		{"GCOwnsRemoteObjects", GCOwnsRemoteObjects},
		{"VerifyNamesMissingObject", VerifyNamesMissingObject},
		{"SaveWithoutUseRemoteRefused", SaveWithoutUseRemoteRefused},
		{"WorkerPartWithoutUseRemoteRefused", WorkerPartWithoutUseRemoteRefused},
		{"WorkersRescaleInPlace", WorkersRescaleInPlace},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // each scenario has stores and directories of its own
			tc.fn(t, newStore(t))
		})
	}
	t.Run("SavepointToAnotherStore", func(t *testing.T) {
		t.Parallel()
		SavepointToAnotherStore(t, newStore(t), newStore(t))
	})
}

// Owners are the operators of every scenario.
var Owners = []string{"op-0", "op-1"}

// Model is what the state holds: owner → key → value.
type Model map[string]map[string]string

// Job is one writer: its Storage and its state in remote mode.
type Job struct {
	Storage *blobstorage.Storage
	State   *state.Store
	Epoch   uint64
	dir     string
}

// StateOptions are the state options of a writer of epoch on bs.
func StateOptions(bs blobstore.Blobstore, epoch uint64) state.Options {
	return state.Options{MemTableSize: 256 << 10, CacheSize: 8 << 20, Remote: state.RemoteOptions{
		Store: bs, Prefix: blobstorage.RemotePrefix, Generation: blobstorage.RemoteGeneration(epoch), CacheSize: 8 << 20,
	}}
}

// NewJob takes the writer role on bs and opens fresh state in remote mode.
func NewJob(t *testing.T, bs blobstore.Blobstore, opts blobstorage.Options) *Job {
	t.Helper()
	dir := t.TempDir()
	w := blobstorage.New(bs, filepath.Join(dir, "ckpt"), opts)
	epoch, err := w.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	st, err := state.Open(filepath.Join(dir, "live"), StateOptions(bs, epoch))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	w.UseRemote(st.CheckpointRemote())
	return &Job{Storage: w, State: st, Epoch: epoch, dir: dir}
}

// Resume is failover onto an empty node: take the writer role (fencing
// the previous writer), restore the latest completed checkpoint (only its
// local part) and open it in remote mode. It returns the job and the id
// it resumed from.
func Resume(t *testing.T, bs blobstore.Blobstore, opts blobstorage.Options) (*Job, string) {
	t.Helper()
	ctx := t.Context()
	dir := t.TempDir()
	w := blobstorage.New(bs, filepath.Join(dir, "ckpt"), opts)
	epoch, err := w.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := w.LoadLatestCompleted(ctx)
	if err != nil || cp == nil {
		t.Fatalf("latest completed: %v %v", cp, err)
	}
	if err := checkpoint.Materialize(ctx, w, cp); err != nil {
		t.Fatal(err)
	}
	st, err := state.OpenCheckpoint(ctx, w.StateDir(cp.ID), filepath.Join(dir, "live"), StateOptions(bs, epoch))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	w.UseRemote(st.CheckpointRemote())
	return &Job{Storage: w, State: st, Epoch: epoch, dir: dir}, cp.ID
}

// Write sets keys [from, to) of seed in every owner (recording them in
// m), flushing every 500 keys so that tables are created.
func (j *Job) Write(t *testing.T, m Model, seed, from, to uint64) {
	t.Helper()
	writeOwners(t, j.State, Owners, m, seed, from, to)
}

// Checkpoint checkpoints the state into StateDir(id) and saves it as
// completed checkpoint id.
func (j *Job) Checkpoint(t *testing.T, seq uint64) string {
	t.Helper()
	id, err := j.TryCheckpoint(t, seq)
	if err != nil {
		t.Fatalf("save %d: %v", seq, err)
	}
	return id
}

// TryCheckpoint is Checkpoint returning the Save's error.
func (j *Job) TryCheckpoint(t *testing.T, seq uint64) (string, error) {
	t.Helper()
	id := checkpoint.NewID(seq)
	dirs, err := j.State.Checkpoint(t.Context(), j.Storage.StateDir(id))
	if err != nil {
		t.Fatal(err)
	}
	return id, j.Storage.Save(t.Context(), &checkpoint.CheckpointData{
		ID: id, Timestamp: time.Now().UTC(), Status: checkpoint.StatusCompleted, StateDirs: dirs,
		Source: map[string][]byte{checkpoint.SourceOffsetsKey: []byte(id)},
	})
}

// Read checks that the state holds exactly what m says, for every key of
// m; it returns the first read error.
func (j *Job) Read(t *testing.T, m Model) error {
	t.Helper()
	return ReadModel(t, j.State, m)
}

// ReadModel checks that st holds exactly what m says, for every key of m
// (the test fails on a value that differs or is missing); it returns the
// first read error.
func ReadModel(t *testing.T, st *state.Store, m Model) error {
	t.Helper()
	for owner, kv := range m {
		o, err := st.Owner(owner)
		if err != nil {
			return err
		}
		for k, want := range kv {
			got, ok, err := o.Get([]byte(k))
			if err != nil {
				return err
			}
			if !ok || string(got) != want {
				t.Fatalf("owner %q key %q: present %v, value differs from what was written", owner, k, ok)
			}
		}
	}
	return nil
}

// Live returns the remote objects the state uses now.
func (j *Job) Live(t *testing.T) map[string]bool {
	t.Helper()
	objs, err := j.State.LiveRemoteObjects()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, o := range objs {
		out[o.Key] = true
	}
	return out
}

// RemoteKeys lists the objects under RemotePrefix.
func RemoteKeys(t *testing.T, bs blobstore.Blobstore) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for o, err := range bs.List(t.Context(), blobstorage.RemotePrefix+"/") {
		if err != nil {
			t.Fatal(err)
		}
		out[o.Key] = true
	}
	return out
}

// Referenced returns the remote keys the record of id references.
func Referenced(t *testing.T, s *blobstorage.Storage, id string) map[string]bool {
	t.Helper()
	rec, err := s.LoadRecord(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, refs := range rec.Remote {
		for _, r := range refs {
			out[r.Key] = true
		}
	}
	return out
}

// HandOffAndFailover: a checkpoint uploads no table (all levels remote)
// and records exactly the objects the state reports, each existing with
// its size; a new writer on an empty node restores it and reads every
// key at once, and its next checkpoint references its own new objects
// (and possibly the first writer's, never anyone else's).
func HandOffAndFailover(t *testing.T, bs blobstore.Blobstore) {
	ctx := t.Context()
	var stats []blobstorage.SaveStats
	a := NewJob(t, bs, blobstorage.Options{Observer: saveObserver(func(s blobstorage.SaveStats) { stats = append(stats, s) })})
	m := Model{}
	a.Write(t, m, 1, 0, 3000)
	id := a.Checkpoint(t, 1)

	rec, err := a.Storage.LoadRecord(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := a.State.RemoteObjects(ctx, a.Storage.StateDir(id))
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) == 0 {
		t.Fatal("the state refers to no remote object")
	}
	var want []blobstorage.RemoteRef
	var wantBytes int64
	for _, o := range objs {
		want = append(want, blobstorage.RemoteRef{Key: o.Key, Size: o.Size})
		wantBytes += o.Size
	}
	var got []blobstorage.RemoteRef
	for _, owner := range slices.Sorted(maps.Keys(rec.Remote)) {
		got = append(got, rec.Remote[owner]...)
	}
	slices.SortFunc(got, func(a, b blobstorage.RemoteRef) int { return strings.Compare(a.Key, b.Key) })
	if !slices.Equal(got, want) {
		t.Fatalf("record references %v, the state %v", got, want)
	}
	for _, r := range got {
		if !strings.HasPrefix(r.Key, blobstorage.RemotePrefix+"/") || !strings.Contains(r.Key, "/"+blobstorage.RemoteGeneration(a.Epoch)+"-") {
			t.Errorf("remote object %q is not under %s/<owner>/%s-…", r.Key, blobstorage.RemotePrefix, blobstorage.RemoteGeneration(a.Epoch))
		}
		if blobstorage.KeyClass(r.Key) != "remote" {
			t.Errorf("KeyClass(%q) = %q", r.Key, blobstorage.KeyClass(r.Key))
		}
	}
	for _, files := range rec.Files {
		for _, f := range files {
			if strings.HasSuffix(f.Path, ".sst") {
				t.Errorf("all-levels checkpoint uploaded table %s", f.Path)
			}
		}
	}
	if len(stats) != 1 || stats[0].RemoteObjects != len(want) || stats[0].RemoteBytes != wantBytes {
		t.Errorf("save stats %+v, want %d remote objects of %d bytes", stats, len(want), wantBytes)
	}
	if err := a.Storage.Verify(ctx, id); err != nil {
		t.Fatalf("verify: %v", err)
	}

	b, from := Resume(t, bs, blobstorage.Options{})
	if from != id {
		t.Fatalf("resumed from %s, want %s", from, id)
	}
	if err := b.Read(t, m); err != nil {
		t.Fatalf("read right after restore: %v", err)
	}
	b.Write(t, m, 2, 0, 1000)
	id2 := b.Checkpoint(t, 2)
	refs := Referenced(t, b.Storage, id2)
	var old, own int
	for k := range refs {
		switch {
		case strings.Contains(k, "/"+blobstorage.RemoteGeneration(a.Epoch)+"-"):
			old++
		case strings.Contains(k, "/"+blobstorage.RemoteGeneration(b.Epoch)+"-"):
			own++
		default:
			t.Errorf("checkpoint %s references %q, of neither writer", id2, k)
		}
	}
	if own == 0 {
		t.Errorf("checkpoint %s references %d objects of the first writer and none of its own", id2, old)
	}
	c, _ := Resume(t, bs, blobstorage.Options{})
	if err := c.Read(t, m); err != nil {
		t.Fatalf("read after the second failover: %v", err)
	}
}

type saveObserver func(blobstorage.SaveStats)

func (f saveObserver) Saved(s blobstorage.SaveStats)   { f(s) }
func (saveObserver) Restored(blobstorage.RestoreStats) {}
func (saveObserver) Collected(blobstorage.GCStats)     {}
func (saveObserver) Fenced(uint64)                     {}

func keysOf(m map[string]bool) []string { return slices.Sorted(maps.Keys(m)) }

// diff returns the keys of a not in b.
func diff(a, b map[string]bool) map[string]bool {
	return filter(a, func(k string) bool { return !b[k] })
}

func filter(m map[string]bool, f func(string) bool) map[string]bool {
	out := map[string]bool{}
	for k := range m {
		if f(k) {
			out[k] = true
		}
	}
	return out
}

// ZombieObjectsNeverReferenced: a writer that is fenced keeps writing,
// flushing and compacting; its Save fails with checkpoint.ErrFenced, the
// new writer's checkpoints reference none of the objects it created after
// the fence, and the new writer's GC deletes them once past the grace
// period.
func ZombieObjectsNeverReferenced(t *testing.T, bs blobstore.Blobstore) {
	ctx := t.Context()
	zombie := NewJob(t, bs, blobstorage.Options{})
	m := Model{}
	zombie.Write(t, m, 1, 0, 2000)
	zombie.Checkpoint(t, 1)
	before := RemoteKeys(t, bs)

	next, _ := Resume(t, bs, blobstorage.Options{Keep: 1})
	// The zombie does not know: it keeps writing (flushes, compactions).
	zm := Model{}
	zombie.Write(t, zm, 7, 0, 4000)
	zombie.Write(t, zm, 8, 0, 4000)
	after := RemoteKeys(t, bs)
	zombieNew := filter(diff(after, before), func(k string) bool {
		return strings.Contains(k, "/"+blobstorage.RemoteGeneration(zombie.Epoch)+"-")
	})
	if len(zombieNew) == 0 {
		t.Fatal("the zombie created no object after the fence")
	}
	if _, err := zombie.TryCheckpoint(t, 5); !errors.Is(err, checkpoint.ErrFenced) {
		t.Fatalf("zombie save: %v, want ErrFenced", err)
	}
	next.Write(t, m, 2, 0, 1500)
	var ids []string
	for seq := uint64(2); seq <= 3; seq++ {
		ids = append(ids, next.Checkpoint(t, seq))
	}
	for _, id := range ids {
		for k := range Referenced(t, next.Storage, id) {
			if zombieNew[k] {
				t.Errorf("checkpoint %s of the new writer references %q, created by the zombie after the fence", id, k)
			}
		}
	}
	// The zombie's Pebble deletes some of its own obsolete objects in
	// the background: stop it, so that what is left is GC's to delete.
	if err := zombie.State.Close(); err != nil {
		t.Fatal(err)
	}
	present := RemoteKeys(t, bs)
	// Past the grace period the new writer's GC deletes the zombie's
	// objects, and the state stays whole.
	rep, err := next.Storage.GC(ctx, blobstorage.GCOptions{Now: PastGrace()})
	if err != nil {
		t.Fatal(err)
	}
	left := RemoteKeys(t, bs)
	for k := range zombieNew {
		if left[k] {
			t.Errorf("GC left the zombie's unreferenced object %q", k)
		}
	}
	// What the zombie's Pebble had not deleted itself, GC did.
	deleted := remoteDeletions(rep)
	for k := range zombieNew {
		if present[k] && !deleted[k] {
			t.Errorf("the zombie's object %q was there before GC, which did not delete it", k)
		}
	}
	if err := next.Read(t, m); err != nil {
		t.Fatalf("the new writer's reads after GC: %v", err)
	}
	last, _ := Resume(t, bs, blobstorage.Options{})
	if err := last.Read(t, m); err != nil {
		t.Fatalf("restore after GC: %v", err)
	}
}

// GCOwnsRemoteObjects: with Keep 1, objects only dropped checkpoints
// referenced and the state no longer uses are deleted past the grace
// period (never before it); a pinned checkpoint's objects stay; a GC that
// is not the writer (a dry run elsewhere) leaves the live writer's
// generation alone and lists what it would delete; the writer's reads,
// the latest checkpoint and the pinned one stay whole.
func GCOwnsRemoteObjects(t *testing.T, bs blobstore.Blobstore) {
	ctx := t.Context()
	first := NewJob(t, bs, blobstorage.Options{})
	m := Model{}
	first.Write(t, m, 1, 0, 2000)
	pinnedID := first.Checkpoint(t, 1)
	pinnedModel := clone(m)
	pinnedRefs := Referenced(t, first.Storage, pinnedID)

	j, _ := Resume(t, bs, blobstorage.Options{Keep: 1, PinTTL: 24 * time.Hour})
	// Overwrite everything, several times: compactions make the first
	// writer's objects and the job's own earlier ones obsolete.
	for seed := uint64(2); seed <= 4; seed++ {
		j.Write(t, m, seed, 0, 2000)
		j.Checkpoint(t, seed)
	}
	latest := j.Checkpoint(t, 5)
	latestRefs := Referenced(t, j.Storage, latest)
	// Writes after the last checkpoint: objects only the live state uses
	// (old, once the clock moves past Grace below).
	j.Write(t, m, 6, 0, 2000)
	live := j.Live(t)
	if len(diff(live, latestRefs)) == 0 {
		t.Fatal("the state uses no object the latest checkpoint does not reference")
	}

	// A restore of the first checkpoint in progress holds a pin (PinTTL
	// is a day here, so the pin outlives the clock moved past Grace).
	if err := bs.Put(ctx, "pins/"+pinnedID+"/test-restore", bytes.NewReader(nil)); err != nil {
		t.Fatal(err)
	}

	// Within the grace period nothing remote goes. (Pebble itself may
	// delete objects its open created and no checkpoint holds: the
	// listings here are compared with GC's report, not with each other.)
	rep, err := j.Storage.GC(ctx, blobstorage.GCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.RemoteObjects != 0 || len(remoteDeletions(rep)) != 0 {
		t.Fatalf("GC within the grace period deleted %d remote objects: %v", rep.RemoteObjects, remoteDeletions(rep))
	}

	later := PastGrace()
	// A dry run by someone else (the CLI): the live writer's objects stay.
	other := blobstorage.New(bs, "", blobstorage.Options{Keep: 1, PinTTL: 24 * time.Hour})
	dry, err := other.GC(ctx, blobstorage.GCOptions{DryRun: true, Now: later})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dry.Deletions {
		if strings.Contains(d.Key, "/"+blobstorage.RemoteGeneration(j.Epoch)+"-") {
			t.Errorf("a GC that is not the writer would delete %q of the live writer (%s)", d.Key, d.Reason)
		}
	}

	rep, err = j.Storage.GC(ctx, blobstorage.GCOptions{Now: later})
	if err != nil {
		t.Fatal(err)
	}
	left := RemoteKeys(t, bs)
	deleted := remoteDeletions(rep)
	if len(deleted) == 0 || rep.RemoteObjects != len(deleted) {
		t.Fatalf("GC deleted %d remote objects, reports %d; want some", len(deleted), rep.RemoteObjects)
	}
	for k := range deleted {
		if latestRefs[k] || pinnedRefs[k] || live[k] {
			t.Errorf("GC deleted %q, referenced by the latest or the pinned checkpoint or used by the live state", k)
		}
		if left[k] {
			t.Errorf("GC reports %q deleted, the store still has it", k)
		}
	}
	var ownObsolete int
	for _, d := range rep.Deletions {
		if d.Reason == blobstorage.DropRemoteObsolete {
			ownObsolete++
		}
	}
	for _, d := range dry.Deletions {
		if strings.HasPrefix(d.Key, blobstorage.RemotePrefix+"/") && left[d.Key] {
			t.Errorf("the dry run listed %q, which the real run kept", d.Key)
		}
	}
	t.Logf("GC deleted %d remote objects (%d the writer's own obsolete ones), kept %d; the dry run elsewhere listed %d (%s)",
		len(deleted), ownObsolete, len(left), len(dry.Deletions), dry.RemoteKept)
	if err := j.Read(t, m); err != nil {
		t.Fatalf("the writer's reads after GC: %v", err)
	}
	if err := j.Storage.Verify(ctx, latest); err != nil {
		t.Fatal(err)
	}
	if err := j.Storage.Verify(ctx, pinnedID); err != nil {
		t.Fatalf("pinned checkpoint: %v", err)
	}
	// The pinned checkpoint restores and reads whole.
	node := blobstorage.New(bs, t.TempDir(), blobstorage.Options{})
	if err := node.Restore(ctx, pinnedID); err != nil {
		t.Fatal(err)
	}
	st, err := state.OpenCheckpoint(ctx, node.StateDir(pinnedID), filepath.Join(t.TempDir(), "live"), StateOptions(bs, j.Epoch+100))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := (&Job{State: st}).Read(t, pinnedModel); err != nil {
		t.Fatalf("read the pinned checkpoint: %v", err)
	}
}

// PastGrace returns the time at which every object that exists now is
// past the default grace period and every object created later is not,
// after letting background flushes and compactions finish. GC relies on
// the grace period to protect an object Pebble has written but not yet
// recorded (a compaction in flight); a test moving the clock must keep
// that true.
func PastGrace() time.Time {
	time.Sleep(500 * time.Millisecond)
	return time.Now().Add(blobstorage.DefaultGrace)
}

// remoteDeletions returns the remote objects rep lists as deleted.
func remoteDeletions(rep blobstorage.GCReport) map[string]bool {
	out := map[string]bool{}
	for _, d := range rep.Deletions {
		if d.Reason == blobstorage.DropRemoteObsolete || d.Reason == blobstorage.DropRemoteUnreferenced {
			out[d.Key] = true
		}
	}
	return out
}

func clone(m Model) Model {
	out := Model{}
	for o, kv := range m {
		out[o] = maps.Clone(kv)
	}
	return out
}

// VerifyNamesMissingObject: verify fails naming a deleted remote object,
// wrapping blobstorage.ErrCorrupt and blobstore.ErrNotFound; a Save of state
// that references it fails naming it too (after a restore, the objects of
// earlier writers are checked once).
func VerifyNamesMissingObject(t *testing.T, bs blobstore.Blobstore) {
	ctx := t.Context()
	a := NewJob(t, bs, blobstorage.Options{})
	a.Write(t, Model{}, 1, 0, 2000)
	id := a.Checkpoint(t, 1)
	refs := keysOf(Referenced(t, a.Storage, id))
	victim := refs[len(refs)/2]
	if err := bs.Delete(ctx, victim); err != nil {
		t.Fatal(err)
	}
	err := a.Storage.Verify(ctx, id)
	if !errors.Is(err, blobstorage.ErrCorrupt) || !errors.Is(err, blobstore.ErrNotFound) || !strings.Contains(err.Error(), victim) {
		t.Fatalf("verify with %s deleted: %v", victim, err)
	}
	b, _ := Resume(t, bs, blobstorage.Options{})
	if _, err := b.TryCheckpoint(t, 2); err == nil || !strings.Contains(err.Error(), victim) {
		t.Fatalf("save of state referencing deleted %s: %v", victim, err)
	}
}

// SaveWithoutUseRemoteRefused: a Save of state in remote mode on a
// Storage that was not told (no UseRemote) fails before writing a record:
// its objects would be owned by no checkpoint.
func SaveWithoutUseRemoteRefused(t *testing.T, bs blobstore.Blobstore) {
	a := NewJob(t, bs, blobstorage.Options{})
	a.Write(t, Model{}, 1, 0, 1000)
	plain := blobstorage.New(bs, t.TempDir(), blobstorage.Options{})
	if _, err := plain.Acquire(t.Context()); err != nil {
		t.Fatal(err)
	}
	a.Storage = plain
	_, err := a.TryCheckpoint(t, 1)
	if !errors.Is(err, blobstorage.ErrRemoteNotOwned) || !strings.Contains(err.Error(), "UseRemote") {
		t.Fatalf("save of remote-mode state without UseRemote: %v", err)
	}
	if cp, err := plain.Load(t.Context()); err != nil || cp != nil {
		t.Fatalf("after the refused save: %v %v, want no checkpoint", cp, err)
	}
}

// SavepointToAnotherStore: a savepoint of a remote-mode checkpoint
// carries its remote objects; copied to another store and restored
// there, the objects are back under the same keys, the record references
// them, and the state opens in remote mode on that store and reads
// correctly, with nothing left of the source store. Restoring it into a
// checkpoint.FileStorage is refused before anything is written.
func SavepointToAnotherStore(t *testing.T, src, dst blobstore.Blobstore) {
	ctx := t.Context()
	a := NewJob(t, src, blobstorage.Options{})
	m := Model{}
	a.Write(t, m, 1, 0, 3000)
	id := a.Checkpoint(t, 1)
	refs := Referenced(t, a.Storage, id)
	if len(refs) == 0 {
		t.Fatal("no remote object to carry")
	}
	if _, err := checkpoint.CreateSavepoint(ctx, a.Storage, src, "v1"); err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.CopySavepoint(ctx, src, dst, "v1"); err != nil {
		t.Fatal(err)
	}

	// A FileStorage cannot hold remote objects: refused, nothing written.
	fsDir := t.TempDir()
	if _, err := checkpoint.RestoreSavepoint(ctx, checkpoint.NewFileStorage(fsDir), dst, "v1"); !errors.Is(err, checkpoint.ErrRemoteState) {
		t.Fatalf("restore into a FileStorage: %v, want ErrRemoteState", err)
	}
	if entries, err := os.ReadDir(fsDir); err != nil || len(entries) != 0 {
		t.Fatalf("the refused restore left %v (%v)", entries, err)
	}

	target := blobstorage.New(dst, t.TempDir(), blobstorage.Options{})
	if _, err := target.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := checkpoint.RestoreSavepoint(ctx, target, dst, "v1")
	if err != nil {
		t.Fatal(err)
	}
	if got != id {
		t.Fatalf("restored as %s, want %s", got, id)
	}
	restored := Referenced(t, target, got)
	if !maps.Equal(restored, refs) {
		t.Fatalf("the restored record references %v, the source %v", keysOf(restored), keysOf(refs))
	}
	in := RemoteKeys(t, dst)
	for k := range refs {
		if !in[k] {
			t.Errorf("remote object %q is not in the target store", k)
		}
	}
	if err := target.Verify(ctx, got); err != nil {
		t.Fatal(err)
	}
	// Nothing of the source is needed any more.
	for k := range RemoteKeys(t, src) {
		if err := src.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	b, from := Resume(t, dst, blobstorage.Options{})
	if from != id {
		t.Fatalf("resumed from %s", from)
	}
	if err := b.Read(t, m); err != nil {
		t.Fatalf("read in the target store: %v", err)
	}
	b.Write(t, m, 2, 0, 500)
	b.Checkpoint(t, 2)
}

// hookStore calls before ahead of every Put.
type hookStore struct {
	blobstore.Blobstore
	mu     sync.Mutex
	before func(key string)
}

func (h *hookStore) Unwrap() blobstore.Blobstore { return h.Blobstore }

func (h *hookStore) Put(ctx context.Context, key string, r io.Reader) error {
	h.mu.Lock()
	f := h.before
	h.mu.Unlock()
	if f != nil {
		f(key)
	}
	return h.Blobstore.Put(ctx, key, r)
}

// ZombieSaveInFlightDuringTakeover: a writer passes its fence check and
// is uploading a checkpoint of state that references objects it created
// since its last one when a new writer takes over (restoring that last
// one). The zombie's Save fails with checkpoint.ErrFenced (its record may
// land, no pointer moves); the new writer saves the same id, replacing
// the zombie's record, and its checkpoints reference none of the objects
// the zombie created after its last saved checkpoint, which GC deletes
// once past the grace period; the state restores whole.
func ZombieSaveInFlightDuringTakeover(t *testing.T, bs blobstore.Blobstore) {
	ctx := t.Context()
	hooked := &hookStore{Blobstore: bs}
	zombie := NewJob(t, hooked, blobstorage.Options{})
	m := Model{}
	zombie.Write(t, m, 1, 0, 2000)
	id1 := zombie.Checkpoint(t, 1)
	saved := Referenced(t, zombie.Storage, id1)
	zombie.Write(t, Model{}, 5, 0, 2000)
	id2 := checkpoint.NewID(2)

	var next *Job
	var once sync.Once
	hooked.mu.Lock()
	hooked.before = func(key string) {
		if strings.HasPrefix(key, "checkpoints/"+id2+"/") {
			// The zombie is uploading id2's files: take over now.
			once.Do(func() { next, _ = Resume(t, bs, blobstorage.Options{Keep: 1}) })
		}
	}
	hooked.mu.Unlock()
	if _, err := zombie.TryCheckpoint(t, 2); !errors.Is(err, checkpoint.ErrFenced) {
		t.Fatalf("the zombie's Save overtaken by a takeover: %v, want ErrFenced", err)
	}
	if next == nil {
		t.Fatal("the zombie uploaded nothing: no takeover happened")
	}
	// Everything the zombie's state references beyond its last saved
	// checkpoint: objects it created after it.
	zombieObjs, err := zombie.State.LiveRemoteObjects()
	if err != nil {
		t.Fatal(err)
	}
	unsaved := map[string]bool{}
	for _, o := range zombieObjs {
		if !saved[o.Key] {
			unsaved[o.Key] = true
		}
	}
	if len(unsaved) == 0 {
		t.Fatal("the zombie created no object after its last checkpoint")
	}

	next.Write(t, m, 2, 0, 1000)
	if got := next.Checkpoint(t, 2); got != id2 {
		t.Fatalf("the new writer saved %s", got)
	}
	next.Write(t, m, 3, 0, 1000)
	id3 := next.Checkpoint(t, 3)
	for _, id := range []string{id2, id3} {
		for k := range Referenced(t, next.Storage, id) {
			if unsaved[k] {
				t.Errorf("checkpoint %s of the new writer references %q, created by the zombie after its last checkpoint", id, k)
			}
		}
	}
	rep, err := next.Storage.GC(ctx, blobstorage.GCOptions{Now: PastGrace()})
	if err != nil {
		t.Fatal(err)
	}
	left := RemoteKeys(t, bs)
	for k := range unsaved {
		if left[k] {
			t.Errorf("GC left the zombie's unsaved object %q (deleted: %d remote objects)", k, rep.RemoteObjects)
		}
	}
	last, from := Resume(t, bs, blobstorage.Options{})
	if from != id3 {
		t.Fatalf("resumed from %s, want %s", from, id3)
	}
	if err := last.Read(t, m); err != nil {
		t.Fatalf("read after GC: %v", err)
	}
}

// WorkerPartWithoutUseRemoteRefused: a Worker's SavePart of state in
// remote mode without Worker.UseRemote fails before writing a part: no
// checkpoint would own the objects.
func WorkerPartWithoutUseRemoteRefused(t *testing.T, bs blobstore.Blobstore) {
	a := NewJob(t, bs, blobstorage.Options{})
	a.Write(t, Model{}, 1, 0, 1000)
	w, err := blobstorage.NewWorker(bs, t.TempDir(), blobstorage.NewWorkerID("w0"), blobstorage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	id := checkpoint.NewID(1)
	dirs, err := a.State.Checkpoint(t.Context(), w.StateDir(id))
	if err != nil {
		t.Fatal(err)
	}
	_, err = w.SavePart(t.Context(), a.Epoch, &checkpoint.CheckpointData{ID: id, StateDirs: dirs, Status: checkpoint.StatusCompleted})
	if !errors.Is(err, blobstorage.ErrRemoteNotOwned) {
		t.Fatalf("SavePart of remote-mode state: %v", err)
	}
	for o, err := range bs.List(t.Context(), "checkpoints/") {
		if err != nil {
			t.Fatal(err)
		}
		t.Errorf("the refused part left %q", o.Key)
	}
}
