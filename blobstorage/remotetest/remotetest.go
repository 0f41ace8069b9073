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
	"errors"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/archive"
	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/state"
)

// Run runs every scenario; newStore returns a new, empty Blobstore for
// each (it may be a prefix of a shared bucket).
func Run(t *testing.T, newStore func(t *testing.T) blobstore.Blobstore) {
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, blobstore.Blobstore)
	}{
		{"HandOffAndFailover", HandOffAndFailover},
		{"ZombieObjectsNeverReferenced", ZombieObjectsNeverReferenced},
		{"GCOwnsRemoteObjects", GCOwnsRemoteObjects},
		{"VerifyNamesMissingObject", VerifyNamesMissingObject},
		{"SaveWithoutUseRemoteRefused", SaveWithoutUseRemoteRefused},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t)) })
	}
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
	for _, owner := range Owners {
		o, err := j.State.Owner(owner)
		if err != nil {
			t.Fatal(err)
		}
		if m[owner] == nil {
			m[owner] = map[string]string{}
		}
		for i := from; i < to; i++ {
			k, v := state.GenerateKV(seed+uint64(len(owner)), i, 200)
			k = append([]byte(owner+"/"), k...)
			if err := o.Set(k, v); err != nil {
				t.Fatal(err)
			}
			m[owner][string(k)] = string(v)
			if i%500 == 499 {
				if err := o.Flush(); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := o.Flush(); err != nil {
			t.Fatal(err)
		}
	}
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
	for owner, kv := range m {
		o, err := j.State.Owner(owner)
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
	// Past the grace period the new writer's GC deletes the zombie's
	// objects, and the state stays whole.
	rep, err := next.Storage.GC(ctx, blobstorage.GCOptions{Now: time.Now().Add(2 * blobstorage.DefaultGrace)})
	if err != nil {
		t.Fatal(err)
	}
	left := RemoteKeys(t, bs)
	for k := range zombieNew {
		if left[k] {
			t.Errorf("GC left the zombie's unreferenced object %q", k)
		}
	}
	if rep.RemoteObjects < len(zombieNew) {
		t.Errorf("GC reports %d remote objects deleted, the zombie alone left %d", rep.RemoteObjects, len(zombieNew))
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

	// Within the grace period nothing remote goes.
	all := RemoteKeys(t, bs)
	rep, err := j.Storage.GC(ctx, blobstorage.GCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.RemoteObjects != 0 || len(RemoteKeys(t, bs)) != len(all) {
		t.Fatalf("GC within the grace period deleted %d remote objects", rep.RemoteObjects)
	}

	later := time.Now().Add(2 * blobstorage.DefaultGrace)
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
	deleted := diff(all, left)
	if len(deleted) == 0 || rep.RemoteObjects != len(deleted) {
		t.Fatalf("GC deleted %d remote objects, reports %d; want some", len(deleted), rep.RemoteObjects)
	}
	for k := range deleted {
		if latestRefs[k] || pinnedRefs[k] || live[k] {
			t.Errorf("GC deleted %q, referenced by the latest or the pinned checkpoint or used by the live state", k)
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

func clone(m Model) Model {
	out := Model{}
	for o, kv := range m {
		out[o] = maps.Clone(kv)
	}
	return out
}

// VerifyNamesMissingObject: verify fails naming a deleted remote object,
// wrapping archive.ErrCorrupt and blobstore.ErrNotFound; a Save of state
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
	if !errors.Is(err, archive.ErrCorrupt) || !errors.Is(err, blobstore.ErrNotFound) || !strings.Contains(err.Error(), victim) {
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
	if err == nil || !strings.Contains(err.Error(), "UseRemote") {
		t.Fatalf("save of remote-mode state without UseRemote: %v", err)
	}
	if cp, err := plain.Load(t.Context()); err != nil || cp != nil {
		t.Fatalf("after the refused save: %v %v, want no checkpoint", cp, err)
	}
}
