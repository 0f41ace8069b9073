package integration

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstorage/remotetest"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/integration/miniotest"
)

// Writer fencing on MinIO: once another BlobStorage has called Acquire,
// the previous writer (a zombie) can neither move a pointer, nor promote
// a checkpoint, nor delete anything, and the pointers never move
// backwards.

// smallState writes a few small files as the state of checkpoint id of s
// (one owner "op-0": a table unique to tag, a MANIFEST) and returns its
// StateDirs.
func smallState(t *testing.T, s *blobstorage.Storage, id, tag string) map[string]string {
	t.Helper()
	dir := filepath.Join(s.StateDir(id), "op-0")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{
		"000001.sst":      strings.Repeat("table "+tag+" ", 200), // a Pebble table name: shared
		"MANIFEST-000001": "manifest of " + id + " by " + tag,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return map[string]string{"op-0": "op-0"}
}

// pointers reads _latest and _latest-completed as stored.
func pointers(t *testing.T, bs blobstore.Blobstore) (latest, done string) {
	t.Helper()
	latest, _ = readPointerObject(t, bs, "_latest")
	done, _ = readPointerObject(t, bs, "_latest-completed")
	return latest, done
}

// TestFencedWriterCannotMovePointersOrDeleteOnMinIO: writer A saves;
// writer B takes over; every write of A then fails with ErrFenced and
// leaves the pointers as B left them, and B's checkpoints restore.
func TestFencedWriterCannotMovePointersOrDeleteOnMinIO(t *testing.T) {
	fencedWriterCannotMovePointersOrDelete(t, miniotest.Shared(t))
}

// The fencing tests' bodies take the server, so that they run on every
// S3 implementation the harness starts (see versitygw_test.go).
func fencedWriterCannotMovePointersOrDelete(t *testing.T, srv *miniotest.Server) {
	ctx := t.Context()
	bs := openBucket(t, srv, srv.NewBucket(t))

	a := acquiredWriter(t, bs, blobstorage.Options{Keep: 1})
	id1, id2, id3 := checkpoint.NewID(1), checkpoint.NewID(2), checkpoint.NewID(3)
	if err := a.Save(ctx, completedRecord(id1, smallState(t, a, id1, "a1"))); err != nil {
		t.Fatalf("A Save(%s): %v", id1, err)
	}
	prepared := completedRecord(id2, smallState(t, a, id2, "a2"))
	prepared.Status = checkpoint.StatusPrepared
	if err := a.Save(ctx, prepared); err != nil {
		t.Fatalf("A Save(%s prepared): %v", id2, err)
	}

	b := acquiredWriter(t, bs, blobstorage.Options{Keep: 1})
	if b.Epoch() <= a.Epoch() {
		t.Fatalf("B took epoch %d, A has %d", b.Epoch(), a.Epoch())
	}
	latest0, done0 := pointers(t, bs)
	if latest0 != id2 || done0 != id1 {
		t.Fatalf("after takeover: _latest=%q _latest-completed=%q, want %s and %s", latest0, done0, id2, id1)
	}

	late := blobstorage.GCOptions{Now: time.Now().Add(3 * time.Hour)}
	for _, op := range []struct {
		name string
		do   func() error
	}{
		{"Save", func() error { return a.Save(ctx, completedRecord(id3, smallState(t, a, id3, "a3"))) }},
		{"UpdateStatus", func() error { return a.UpdateStatus(ctx, id2, checkpoint.StatusCompleted) }},
		{"GC", func() error { _, err := a.GC(ctx, late); return err }},
	} {
		if err := op.do(); !errors.Is(err, checkpoint.ErrFenced) {
			t.Errorf("fenced A %s = %v, want ErrFenced", op.name, err)
		}
		if l, d := pointers(t, bs); l != latest0 || d != done0 {
			t.Fatalf("fenced A %s moved the pointers to %q/%q (were %q/%q)", op.name, l, d, latest0, done0)
		}
	}
	if _, err := bs.Stat(ctx, "checkpoints/"+id3+"/checkpoint.json"); !errors.Is(err, blobstore.ErrNotFound) {
		t.Errorf("fenced A's Save left a record for %s: Stat = %v", id3, err)
	}

	// B goes on: promotes A's prepared checkpoint, saves its own, GCs.
	if err := b.UpdateStatus(ctx, id2, checkpoint.StatusCompleted); err != nil {
		t.Fatalf("B UpdateStatus(%s): %v", id2, err)
	}
	if _, d := pointers(t, bs); d != id2 {
		t.Fatalf("_latest-completed after B promoted %s = %q", id2, d)
	}
	if err := b.Save(ctx, completedRecord(id3, smallState(t, b, id3, "b3"))); err != nil {
		t.Fatalf("B Save(%s): %v", id3, err)
	}
	if _, err := b.GC(ctx, late); err != nil {
		t.Fatalf("B GC: %v", err)
	}
	if l, d := pointers(t, bs); l != id3 || d != id3 {
		t.Fatalf("pointers after B's Save and GC = %q/%q, want %s", l, d, id3)
	}
	if err := b.Verify(ctx, id3); err != nil {
		t.Fatalf("Verify(%s): %v", id3, err)
	}
	sameTree(t, b.StateDir(id3), restoreOnEmptyNode(t, bs, id3))
	// A is still fenced, whatever it tries next.
	if err := a.Save(ctx, completedRecord(checkpoint.NewID(4), smallState(t, a, checkpoint.NewID(4), "a4"))); !errors.Is(err, checkpoint.ErrFenced) {
		t.Fatalf("fenced A Save after B's progress = %v, want ErrFenced", err)
	}
	if l, d := pointers(t, bs); l != id3 || d != id3 {
		t.Fatalf("pointers moved by fenced A to %q/%q", l, d)
	}
}

// TestZombieSaveInFlightDuringTakeoverIsFencedOnMinIO: A passed its
// writer check and is uploading when B takes over; A's record may land
// but no pointer moves, A's Save fails with ErrFenced, and B's next
// checkpoint becomes the latest completed one.
func TestZombieSaveInFlightDuringTakeoverIsFencedOnMinIO(t *testing.T) {
	zombieSaveInFlightDuringTakeoverIsFenced(t, miniotest.Shared(t))
}

func zombieSaveInFlightDuringTakeoverIsFenced(t *testing.T, srv *miniotest.Server) {
	ctx := t.Context()
	raw := openBucket(t, srv, srv.NewBucket(t))
	b := blobstorage.New(raw, t.TempDir(), blobstorage.Options{})
	var armed atomic.Bool
	var once sync.Once
	var takeover error
	fs := blobstoretest.Intercept(raw, blobstoretest.Hooks{
		Before: func(_ context.Context, c *blobstoretest.Call) error {
			if armed.Load() && c.IsWrite() && strings.HasPrefix(c.Key, "shared/") {
				// A is uploading its tables: B takes over now.
				once.Do(func() { _, takeover = b.Acquire(context.WithoutCancel(ctx)) })
			}
			return nil
		},
	})
	a := acquiredWriter(t, fs, blobstorage.Options{})
	id1, id2, id3 := checkpoint.NewID(1), checkpoint.NewID(2), checkpoint.NewID(3)
	if err := a.Save(ctx, completedRecord(id1, smallState(t, a, id1, "a1"))); err != nil {
		t.Fatal(err)
	}
	armed.Store(true)
	err := a.Save(ctx, completedRecord(id2, smallState(t, a, id2, "a2")))
	if takeover != nil {
		t.Fatalf("B Acquire during A's upload: %v", takeover)
	}
	if !errors.Is(err, checkpoint.ErrFenced) {
		t.Fatalf("A's Save overtaken by B's Acquire = %v, want ErrFenced", err)
	}
	if l, d := pointers(t, raw); l != id1 || d != id1 {
		t.Fatalf("pointers after the zombie's Save = %q/%q, want %s", l, d, id1)
	}
	if _, epoch := readPointerObject(t, raw, "_latest-completed"); epoch != b.Epoch() {
		t.Fatalf("_latest-completed carries epoch %d, want B's %d", epoch, b.Epoch())
	}
	// B saves the next id after the latest; the zombie's leftover record
	// (if any) under id2 does not stop it.
	next, err := checkpoint.NextID(id1)
	if err != nil {
		t.Fatal(err)
	}
	if next != id2 {
		t.Fatalf("NextID(%s) = %s", id1, next)
	}
	for _, id := range []string{id2, id3} {
		if err := b.Save(ctx, completedRecord(id, smallState(t, b, id, "b-"+id))); err != nil {
			t.Fatalf("B Save(%s): %v", id, err)
		}
		if got := latestCompletedID(t, raw); got != id {
			t.Fatalf("latest completed after B saved %s = %q", id, got)
		}
		sameTree(t, b.StateDir(id), restoreOnEmptyNode(t, raw, id))
	}
}

// fenceRun drives 2–3 writers of one bucket through random operations, as
// the property test in package checkpoint does with an in-memory store,
// and checks the same invariants after every step.
type fenceRun struct {
	t        *testing.T
	bs       blobstore.Blobstore
	root     string
	writers  []*blobstorage.Storage
	acquired []bool
	current  int                          // the last writer to Acquire, -1: none
	lastSave []string                     // per writer: its last saved id (its tables are hard-linked)
	want     map[string]map[string]string // id → owner/path → sha256 of what was saved
	seq      int                          // makes every new table unique
	latest   string                       // last observed _latest
	done     string                       // last observed _latest-completed
	restored string                       // last checkpoint restored on an empty node
	wk       *runWorkers                  // the job's workers (workers_fencing_test.go); nil: none
	remote   bool                         // writers in remote mode (remotetest.FakeRemote)
	lateGCs  int                          // GCs run past the grace period so far
}

func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// expect checks err against what writer w must get: ErrNotWriter before
// Acquire, ErrFenced once another writer acquired after it, success for
// the current writer. It reports whether the operation succeeded.
func (r *fenceRun) expect(w int, op string, err error) bool {
	r.t.Helper()
	switch {
	case !r.acquired[w]:
		if !errors.Is(err, blobstorage.ErrNotWriter) {
			r.t.Fatalf("writer %d %s before Acquire = %v, want ErrNotWriter", w, op, err)
		}
		return false
	case w != r.current:
		if !errors.Is(err, checkpoint.ErrFenced) {
			r.t.Fatalf("fenced writer %d %s = %v, want ErrFenced", w, op, err)
		}
		return false
	case err != nil:
		r.t.Fatalf("current writer %d %s: %v", w, op, err)
	}
	return true
}

func (r *fenceRun) newWriter(w int) *blobstorage.Storage {
	s := blobstorage.New(r.bs, filepath.Join(r.root, strconv.Itoa(w)), blobstorage.Options{Keep: 2, Concurrency: 2})
	if r.remote {
		s.UseRemote(remotetest.FakeRemote{Store: r.bs})
	}
	return s
}

func (r *fenceRun) acquire(w int) {
	if _, err := r.writers[w].Acquire(r.t.Context()); err != nil {
		r.t.Fatalf("writer %d Acquire: %v", w, err)
	}
	r.acquired[w], r.current = true, w
}

// restart replaces writer w by a new process on the same disk.
func (r *fenceRun) restart(w int) {
	r.writers[w] = r.newWriter(w)
	r.acquired[w] = false
	if r.current == w {
		r.current = -1
	}
}

func (r *fenceRun) save(w int, completed bool) {
	ctx := r.t.Context()
	s := r.writers[w]
	prev, err := s.Load(ctx)
	if err != nil {
		r.t.Fatalf("Load: %v", err)
	}
	prevID := ""
	if prev != nil {
		prevID = prev.ID
	}
	id, err := checkpoint.NextID(prevID)
	if err != nil {
		r.t.Fatal(err)
	}
	r.seq++
	dir := filepath.Join(s.StateDir(id), "w")
	_ = os.RemoveAll(s.StateDir(id)) // a failed attempt of this writer
	if err := os.MkdirAll(dir, 0o755); err != nil {
		r.t.Fatal(err)
	}
	want := map[string]string{}
	// Hard-link the tables of this writer's previous checkpoint, as
	// Pebble does: unchanged tables keep their identity.
	if last := r.lastSave[w]; last != "" {
		entries, _ := os.ReadDir(filepath.Join(s.StateDir(last), "w"))
		for _, e := range entries {
			if !strings.HasSuffix(e.Name(), ".sst") {
				continue
			}
			from := filepath.Join(s.StateDir(last), "w", e.Name())
			b, err := os.ReadFile(from)
			if err != nil {
				r.t.Fatal(err)
			}
			if err := os.Link(from, filepath.Join(dir, e.Name())); err != nil {
				r.t.Fatal(err)
			}
			want["w/"+e.Name()] = sha256Hex(b)
		}
	}
	for name, content := range map[string]string{
		fmt.Sprintf("%06d.sst", r.seq): strings.Repeat(strconv.Itoa(r.seq)+" ", 100),
		"MANIFEST":                     "manifest " + id,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			r.t.Fatal(err)
		}
		want["w/"+name] = sha256Hex([]byte(content))
	}
	d := completedRecord(id, map[string]string{"w": "w"})
	if !completed {
		d.Status = checkpoint.StatusPrepared
	}
	if r.saveOrCommit(w, d, want) {
		r.want[id] = want
		r.lastSave[w] = id
	}
}

func (r *fenceRun) promote(w int) {
	latest, err := r.writers[w].Load(r.t.Context())
	if err != nil {
		r.t.Fatalf("Load: %v", err)
	}
	if latest == nil {
		return
	}
	r.expect(w, "UpdateStatus "+latest.ID, r.writers[w].UpdateStatus(r.t.Context(), latest.ID, checkpoint.StatusCompleted))
}

func (r *fenceRun) gc(w int, late bool) {
	opts := blobstorage.GCOptions{}
	if late {
		opts.Now = time.Now().Add(3 * time.Hour)
	}
	_, err := r.writers[w].GC(r.t.Context(), opts)
	if !r.acquired[w] {
		// An operator's GC beside the writers: it needs no writer role,
		// and the invariants must hold after it all the same.
		if err != nil {
			r.t.Fatalf("writer %d GC before Acquire (an operator's GC): %v", w, err)
		}
		return
	}
	if r.expect(w, "GC", err) && late {
		r.lateGCs++
	}
}

// check asserts the invariants: the pointers never move backwards; the
// latest completed checkpoint is a completed record naming exactly the
// files that were saved, all present with their digests; and it restores
// byte-exact on an empty node.
func (r *fenceRun) check() {
	ctx := r.t.Context()
	reader := blobstorage.New(r.bs, "", blobstorage.Options{})
	latest, err := reader.Load(ctx)
	if err != nil {
		r.t.Fatalf("Load: %v", err)
	}
	done, err := reader.LoadLatestCompleted(ctx)
	if err != nil {
		r.t.Fatalf("LoadLatestCompleted: %v", err)
	}
	for _, p := range []struct {
		name string
		d    *checkpoint.CheckpointData
		last *string
	}{{"_latest", latest, &r.latest}, {"_latest-completed", done, &r.done}} {
		id := ""
		if p.d != nil {
			id = p.d.ID
		}
		if id < *p.last {
			r.t.Fatalf("%s moved back from %s to %s", p.name, *p.last, id)
		}
		*p.last = id
	}
	if r.wk != nil {
		r.wk.checkMarks()
	}
	if done == nil {
		return
	}
	if !done.Completed() {
		r.t.Fatalf("_latest-completed names %s, status %q", done.ID, done.Status)
	}
	files, err := reader.Files(ctx, done.ID)
	if err != nil {
		r.t.Fatal(err)
	}
	got := map[string]string{}
	for owner, refs := range files {
		for _, f := range refs {
			got[owner+"/"+f.Path] = f.SHA256
		}
	}
	if want := r.want[done.ID]; !maps.Equal(got, want) {
		r.t.Fatalf("%s records %v, saved %v", done.ID, got, want)
	}
	if err := reader.Verify(ctx, done.ID); err != nil {
		r.t.Fatalf("latest completed %s does not verify: %v", done.ID, err)
	}
	if done.ID != r.restored {
		node := blobstorage.New(r.bs, r.t.TempDir(), blobstorage.Options{})
		if err := node.Restore(ctx, done.ID); err != nil {
			r.t.Fatalf("Restore(%s) on an empty node: %v", done.ID, err)
		}
		restored := map[string]string{}
		for rel := range r.want[done.ID] {
			b, err := os.ReadFile(filepath.Join(node.StateDir(done.ID), filepath.FromSlash(rel)))
			if err != nil {
				r.t.Fatalf("restored %s: %v", done.ID, err)
			}
			restored[rel] = sha256Hex(b)
		}
		if !maps.Equal(restored, r.want[done.ID]) {
			r.t.Fatalf("restored %s holds %v, saved %v", done.ID, restored, r.want[done.ID])
		}
		r.restored = done.ID
	}
}

// TestRandomWritersKeepFencingInvariantsOnMinIO runs a random sequence of
// about 30 operations (acquire, save prepared or completed, promote, GC
// now or past every grace period, restart) by 2–3 writers of one bucket,
// and by two workers of the job (barriers of parts, some under a stale
// epoch or by a zombie, committed by the acting writer; a worker replaced
// by a fresh one that restores its owner).
// The seed is logged; TIDEMARK_FENCE_SEED replays one.
func TestRandomWritersKeepFencingInvariantsOnMinIO(t *testing.T) {
	randomWritersKeepFencingInvariants(t, miniotest.Shared(t))
}

// The same in remote mode: every checkpoint also hands over one object
// per owner (remotetest.FakeRemote), which GC must keep while a retained
// checkpoint references it (check verifies the latest completed one).
func TestRandomWritersKeepFencingInvariantsInRemoteModeOnMinIO(t *testing.T) {
	randomFencing(t, miniotest.Shared(t), true)
}

func randomWritersKeepFencingInvariants(t *testing.T, srv *miniotest.Server) {
	randomFencing(t, srv, false)
}

func randomFencing(t *testing.T, srv *miniotest.Server, remote bool) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("TIDEMARK_FENCE_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("TIDEMARK_FENCE_SEED=%q: %v", s, err)
		}
	}
	t.Logf("seed %d (replay with TIDEMARK_FENCE_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed>>1|1))
	n := 2 + rng.IntN(2)
	r := &fenceRun{
		t: t, bs: openBucket(t, srv, srv.NewBucket(t)), root: t.TempDir(), current: -1,
		acquired: make([]bool, n), lastSave: make([]string, n), want: map[string]map[string]string{}, remote: remote,
	}
	withWorkers(r, 2)
	for w := range n {
		r.writers = append(r.writers, r.newWriter(w))
	}
	ops := []string{"acquire", "save-prepared", "save-completed", "save-completed", "promote", "gc", "gc-late", "restart",
		"barrier-prepared", "barrier-completed", "barrier-completed", "replace-worker"}
	counts := map[string]int{}
	for step := range 30 {
		w := rng.IntN(n)
		if r.current >= 0 && rng.IntN(2) == 0 {
			w = r.current // half the time the current writer acts: runs make progress
		}
		op := ops[rng.IntN(len(ops))]
		// Start with an acquire, so that runs do something useful.
		if step == 0 {
			op = "acquire"
		}
		counts[op]++
		switch op {
		case "acquire":
			r.acquire(w)
		case "save-prepared", "save-completed":
			r.save(w, op == "save-completed")
		case "barrier-prepared", "barrier-completed":
			r.wk.barrier(rng)
			r.save(w, op == "barrier-completed")
		case "replace-worker":
			r.wk.replace(rng.IntN(len(r.wk.slots)))
		case "promote":
			r.promote(w)
		case "gc", "gc-late":
			r.gc(w, op == "gc-late")
		case "restart":
			r.restart(w)
		}
		r.check()
	}
	t.Logf("%d writers, operations %v, latest %q, latest completed %q", n, counts, r.latest, r.done)
}
