package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
	"github.com/tidemark-io/tidemark/checkpoint"
)

// runWorkers grows fenceRun (fencing_test.go) with a job's workers on
// MinIO: one live worker per slot (owner p<slot>), the workers they
// replaced (zombies, which keep writing), barriers under the current or a
// stale epoch, and commits by whichever writer acts. Every key a worker
// writes is marked with whether it was a zombie or wrote under a fenced
// epoch; no committed record may name such a key.
type runWorkers struct {
	r       *fenceRun
	slots   []*runWorker
	zombies []*runWorker
	n       int
	commit  bool // the next fenceRun.save commits the workers' parts

	mu      sync.Mutex
	writing *keyMark
	marks   map[string]keyMark
}

type runWorker struct {
	w        *blobstorage.Worker
	slot     int
	replaced bool
	lastPart string                                  // checkpoint whose state dir holds its tables
	parts    map[string]map[uint64]map[string]string // id → epoch → path → sha256
	gcsAt    map[string]int                          // "<id>/e<epoch>" → fenceRun.lateGCs when the part was saved
}

type keyMark struct {
	worker         string
	zombie, fenced bool
}

// withWorkers wraps the run's store so that worker writes are marked and
// starts one worker per slot.
func withWorkers(r *fenceRun, slots int) {
	wk := &runWorkers{r: r, marks: map[string]keyMark{}}
	// Every write made while a worker saves is marked with who made it.
	r.bs = blobstoretest.Intercept(r.bs, blobstoretest.Hooks{
		Before: func(_ context.Context, c *blobstoretest.Call) error {
			if c.IsWrite() {
				wk.mark(c.Key)
			}
			return nil
		},
	})
	r.wk = wk
	for i := range slots {
		wk.slots = append(wk.slots, wk.newWorker(i))
	}
}

// mark records who is writing key, if a worker is saving.
func (wk *runWorkers) mark(key string) {
	wk.mu.Lock()
	defer wk.mu.Unlock()
	if wk.writing != nil {
		wk.marks[key] = *wk.writing
	}
}

func slotOwner(slot int) string { return "p" + strconv.Itoa(slot) }

func (wk *runWorkers) newWorker(slot int) *runWorker {
	wk.n++
	w, err := blobstorage.NewWorker(wk.r.bs, filepath.Join(wk.r.root, "worker-"+strconv.Itoa(wk.n)), blobstorage.NewWorkerID("s"+strconv.Itoa(slot)), blobstorage.Options{Concurrency: 2})
	if err != nil {
		wk.r.t.Fatal(err)
	}
	return &runWorker{w: w, slot: slot, parts: map[string]map[uint64]map[string]string{}, gcsAt: map[string]int{}}
}

// storeEpochAndNext reads the epoch in _writer (what live workers are
// told) and the id the next checkpoint takes.
func (wk *runWorkers) storeEpochAndNext() (uint64, string) {
	ctx := wk.r.t.Context()
	var epoch uint64
	rc, err := wk.r.bs.Get(ctx, "_writer")
	if err == nil {
		var wr struct {
			Epoch uint64 `json:"epoch"`
		}
		err = json.NewDecoder(rc).Decode(&wr)
		rc.Close()
		epoch = wr.Epoch
	}
	if err != nil && !errors.Is(err, blobstore.ErrNotFound) {
		wk.r.t.Fatal(err)
	}
	latest, err := blobstorage.New(wk.r.bs, "", blobstorage.Options{}).Load(ctx)
	if err != nil {
		wk.r.t.Fatal(err)
	}
	prev := ""
	if latest != nil {
		prev = latest.ID
	}
	id, err := checkpoint.NextID(prev)
	if err != nil {
		wk.r.t.Fatal(err)
	}
	return epoch, id
}

// barrier has every live worker save its part of the next checkpoint
// (now and then under the previous epoch: a barrier of a replaced
// writer), a zombie sometimes too, and makes the next save a commit.
func (wk *runWorkers) barrier(rng interface{ IntN(int) int }) {
	for _, rw := range wk.slots {
		wk.savePart(rw, rng.IntN(4) == 0)
	}
	if len(wk.zombies) > 0 && rng.IntN(2) == 0 {
		wk.savePart(wk.zombies[rng.IntN(len(wk.zombies))], false)
	}
	wk.commit = true
}

func (wk *runWorkers) savePart(rw *runWorker, stale bool) {
	t, ctx := wk.r.t, wk.r.t.Context()
	cur, id := wk.storeEpochAndNext()
	if cur == 0 {
		return
	}
	epoch := cur
	if stale && cur > 1 {
		epoch = cur - 1
	}
	if wk.parts(rw, id)[epoch] != nil {
		return // written once (a second SavePart is refused: unit tests)
	}
	owner := slotOwner(rw.slot)
	dir := filepath.Join(rw.w.StateDir(id), owner)
	_ = os.RemoveAll(rw.w.StateDir(id))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	if last := rw.lastPart; last != "" && last != id {
		entries, _ := os.ReadDir(filepath.Join(rw.w.StateDir(last), owner))
		for _, e := range entries {
			if !strings.HasSuffix(e.Name(), ".sst") {
				continue
			}
			from := filepath.Join(rw.w.StateDir(last), owner, e.Name())
			b, err := os.ReadFile(from)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Link(from, filepath.Join(dir, e.Name())); err != nil {
				t.Fatal(err)
			}
			want[e.Name()] = sha256Hex(b)
		}
	}
	wk.r.seq++
	for name, content := range map[string]string{
		fmt.Sprintf("%06d.sst", wk.r.seq): strings.Repeat(strconv.Itoa(wk.r.seq)+" ", 100),
		"MANIFEST":                        fmt.Sprintf("manifest %s %s e%d", rw.w.ID(), id, epoch),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		want[name] = sha256Hex([]byte(content))
	}
	wk.mu.Lock()
	wk.writing = &keyMark{worker: rw.w.ID(), zombie: rw.replaced, fenced: epoch < cur}
	wk.mu.Unlock()
	_, err := rw.w.SavePart(ctx, epoch, &checkpoint.CheckpointData{ID: id, StateDirs: map[string]string{owner: owner}})
	wk.mu.Lock()
	wk.writing = nil
	wk.mu.Unlock()
	if err != nil {
		t.Fatalf("worker %s SavePart(%s, e%d): %v", rw.w.ID(), id, epoch, err)
	}
	wk.parts(rw, id)[epoch] = want
	rw.gcsAt[id+"/e"+strconv.FormatUint(epoch, 10)] = wk.r.lateGCs
	rw.lastPart = id
}

func (wk *runWorkers) parts(rw *runWorker, id string) map[uint64]map[string]string {
	if rw.parts[id] == nil {
		rw.parts[id] = map[uint64]map[string]string{}
	}
	return rw.parts[id]
}

// replace starts a fresh worker on an empty disk for a random slot; the
// old one becomes a zombie. The new one restores its owner of the latest
// completed checkpoint, when that has it, and must get exactly its state.
func (wk *runWorkers) replace(slot int) {
	t, ctx := wk.r.t, wk.r.t.Context()
	old := wk.slots[slot]
	old.replaced = true
	wk.zombies = append(wk.zombies, old)
	nw := wk.newWorker(slot)
	wk.slots[slot] = nw
	done, err := blobstorage.New(wk.r.bs, "", blobstorage.Options{}).LoadLatestCompleted(ctx)
	if err != nil {
		t.Fatal(err)
	}
	owner := slotOwner(slot)
	if done == nil || done.StateDirs[owner] == "" {
		return
	}
	if err := nw.w.Restore(ctx, done.ID, []string{owner}); err != nil {
		t.Fatalf("worker Restore(%s, %s): %v", done.ID, owner, err)
	}
	got, want := map[string]string{}, map[string]string{}
	root := filepath.Join(nw.w.StateDir(done.ID), owner)
	entries, _ := os.ReadDir(root)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(root, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		got[owner+"/"+e.Name()] = sha256Hex(b)
	}
	for k, v := range wk.r.want[done.ID] {
		if strings.HasPrefix(k, owner+"/") {
			want[k] = v
		}
	}
	if !maps.Equal(got, want) {
		t.Fatalf("worker restore of %s of %s = %v, want %v", owner, done.ID, got, want)
	}
	nw.lastPart = done.ID
}

// saveOrCommit is fenceRun.save's Save: a plain one, or after a barrier
// a commit of the live workers' parts. It reports whether d committed
// (adding the parts' files to want). A commit must succeed exactly when
// the writer is current and every live worker saved its part under its
// epoch — unless a file a part reuses was deleted since (a late GC of an
// uncommitted upload), which Save must refuse.
func (r *fenceRun) saveOrCommit(w int, d *checkpoint.CheckpointData, want map[string]string) bool {
	s := r.writers[w]
	if r.wk == nil || !r.wk.commit {
		return r.expect(w, "Save "+d.ID, s.Save(r.t.Context(), d))
	}
	r.wk.commit = false
	a := blobstorage.Assignment{}
	for _, rw := range r.wk.slots {
		a[slotOwner(rw.slot)] = rw.w.ID()
	}
	if err := s.Assign(a); err != nil {
		r.t.Fatal(err)
	}
	defer func() { _ = s.Assign(nil) }()
	err := s.Save(r.t.Context(), d)
	if !r.acquired[w] || w != r.current {
		return r.expect(w, "commit "+d.ID, err)
	}
	epoch, complete := s.Epoch(), true
	for _, rw := range r.wk.slots {
		if rw.parts[d.ID][epoch] == nil {
			complete = false
		}
	}
	switch {
	case complete && err == nil:
		for _, rw := range r.wk.slots {
			for p, h := range rw.parts[d.ID][epoch] {
				want[slotOwner(rw.slot)+"/"+p] = h
			}
		}
		return true
	case !complete && errors.Is(err, blobstorage.ErrPartMissing):
		return false
	case !complete:
		r.t.Fatalf("commit %s e%d without every part = %v, want ErrPartMissing", d.ID, epoch, err)
	case errors.Is(err, blobstorage.ErrPartMissing) && r.wk.reusesDeleted(d.ID, epoch):
		return false
	default:
		r.t.Fatalf("commit %s e%d with every part: %v", d.ID, epoch, err)
	}
	return false
}

// reusesDeleted reports whether a live worker's part of id, or a file it
// names, is no longer in the store. A part itself is gone only if a GC
// past the grace period ran after it was saved (an uncommitted part is
// then a leftover). (The test spells the part's key, documented in
// package blobstorage.)
func (wk *runWorkers) reusesDeleted(id string, epoch uint64) bool {
	ctx := wk.r.t.Context()
	for _, rw := range wk.slots {
		key := path.Join("checkpoints", id, "parts", "e"+strconv.FormatUint(epoch, 10), slotOwner(rw.slot), rw.w.ID(), "part.json")
		rc, err := wk.r.bs.Get(ctx, key)
		if errors.Is(err, blobstore.ErrNotFound) && wk.r.lateGCs > rw.gcsAt[id+"/e"+strconv.FormatUint(epoch, 10)] {
			return true
		}
		if err != nil {
			wk.r.t.Fatal(err)
		}
		var p blobstorage.Part
		err = json.NewDecoder(rc).Decode(&p)
		rc.Close()
		if err != nil {
			wk.r.t.Fatal(err)
		}
		for _, f := range p.Files {
			if ok, err := wk.r.bs.Exists(ctx, f.Key); err != nil {
				wk.r.t.Fatal(err)
			} else if !ok {
				return true
			}
		}
	}
	return false
}

// checkMarks fails if a committed record still in the store names a key
// written by a replaced worker after its replacement or under a fenced
// epoch.
func (wk *runWorkers) checkMarks() {
	ctx := wk.r.t.Context()
	reader := blobstorage.New(wk.r.bs, "", blobstorage.Options{})
	ids, err := reader.IDs(ctx)
	if err != nil {
		wk.r.t.Fatal(err)
	}
	for _, id := range ids {
		if _, ok := wk.r.want[id]; !ok {
			continue
		}
		files, err := reader.Files(ctx, id)
		if err != nil {
			wk.r.t.Fatal(err)
		}
		for _, refs := range files {
			for _, f := range refs {
				wk.mu.Lock()
				m, ok := wk.marks[f.Key]
				wk.mu.Unlock()
				if ok && (m.zombie || m.fenced) {
					wk.r.t.Fatalf("%s commits %s, written by worker %s (replaced %v, fenced epoch %v)", id, f.Key, m.worker, m.zombie, m.fenced)
				}
			}
		}
	}
}
