package blobstorage

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"pgregory.net/rapid"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
)

// workerModel grows fenceModel with the job's workers: one live worker
// per slot (owner p<slot>), the workers they replaced (zombies, which
// keep writing), parts under the current or a stale epoch, and commits.
type workerModel struct {
	root    string
	slots   []*modelWorker // the live worker of each slot
	zombies []*modelWorker
	n       int // worker incarnations so far

	mu      sync.Mutex
	writing *writeMark           // set while a SavePart runs
	keys    map[string]writeMark // key → who last wrote it, and when
}

type modelWorker struct {
	w        *Worker
	slot     int
	replaced bool   // a zombie: a newer worker runs its slot
	lastPart string // checkpoint whose state dir holds its latest tables
	parts    map[partAt]map[string]string
	gcsAt    map[partAt]int // fenceModel.lateGCs when the part was saved
}

type partAt struct {
	id    string
	epoch uint64
}

// writeMark says who wrote a key: a replaced worker (after its
// replacement), or a worker under an epoch already fenced.
type writeMark struct {
	worker         string
	zombie, fenced bool
}

func ownerOf(slot int) string { return fmt.Sprintf("p%d", slot) }

func newWorkerModel(m *fenceModel, root string, slots int) *workerModel {
	wm := &workerModel{root: root, keys: map[string]writeMark{}}
	for i := range slots {
		wm.slots = append(wm.slots, wm.newWorker(m, i))
	}
	m.bs.before = func(_, key string) {
		wm.mu.Lock()
		defer wm.mu.Unlock()
		if wm.writing != nil {
			wm.keys[key] = *wm.writing
		}
	}
	return wm
}

func (wm *workerModel) newWorker(m *fenceModel, slot int) *modelWorker {
	wm.n++
	w, err := NewWorker(m.bs, filepath.Join(wm.root, fmt.Sprint(wm.n)), NewWorkerID(fmt.Sprintf("s%d", slot)), Options{Concurrency: 2})
	if err != nil {
		m.t.Fatal(err)
	}
	return &modelWorker{w: w, slot: slot, parts: map[partAt]map[string]string{}, gcsAt: map[partAt]int{}}
}

// storeEpoch is the epoch in _writer: the one every live worker is told.
func storeEpoch(m *fenceModel) uint64 {
	var wr writerRecord
	_, err := New(m.bs, "", Options{}).getJSON(ctx, keyWriter, &wr, false)
	if err != nil && !errors.Is(err, blobstore.ErrNotFound) {
		m.t.Fatal(err)
	}
	return wr.Epoch
}

func nextID(m *fenceModel) string {
	latest, err := New(m.bs, "", Options{}).Load(ctx)
	if err != nil {
		m.t.Fatal(err)
	}
	id, err := checkpoint.NextID(idOrEmpty(latest))
	if err != nil {
		m.t.Fatal(err)
	}
	return id
}

// part has a live worker (or, with zombie, a replaced one) save its
// owner's part of the next checkpoint, under the current epoch or a
// stale one.
func (wm *workerModel) part(m *fenceModel, zombie bool) {
	slot := rapid.IntRange(0, len(wm.slots)-1).Draw(m.t, "slot")
	stale := rapid.Bool().Draw(m.t, "stale-epoch")
	wm.partBy(m, slot, zombie, stale)
}

// round has every live worker save its part of the next checkpoint, as
// a coordinator's checkpoint barrier does: under the current epoch, or
// now and then under the previous one (a barrier from a writer that has
// since been replaced).
// A zombie may save its part of the same checkpoint in between.
func (wm *workerModel) round(m *fenceModel) {
	for slot := range wm.slots {
		wm.partBy(m, slot, false, rapid.IntRange(0, 3).Draw(m.t, "stale-round") == 0)
	}
	if len(wm.zombies) > 0 && rapid.Bool().Draw(m.t, "zombie-in-round") {
		z := wm.zombies[rapid.IntRange(0, len(wm.zombies)-1).Draw(m.t, "zombie")]
		wm.partOf(m, z, false)
	}
}

func (wm *workerModel) partBy(m *fenceModel, slot int, zombie, stale bool) {
	mw := wm.slots[slot]
	if zombie {
		var zs []*modelWorker
		for _, z := range wm.zombies {
			if z.slot == slot {
				zs = append(zs, z)
			}
		}
		if len(zs) == 0 {
			return
		}
		mw = zs[rapid.IntRange(0, len(zs)-1).Draw(m.t, "zombie")]
	}
	wm.partOf(m, mw, stale)
}

func (wm *workerModel) partOf(m *fenceModel, mw *modelWorker, stale bool) {
	cur := storeEpoch(m)
	if cur == 0 {
		return // no writer yet: nobody to tell a worker an epoch
	}
	epoch := cur
	if cur > 1 && stale {
		epoch = cur - 1
	}
	id, owner := nextID(m), ownerOf(mw.slot)
	at := partAt{id, epoch}
	data := &checkpoint.CheckpointData{ID: id, StateDirs: map[string]string{owner: owner}}
	if _, done := mw.parts[at]; done && m.hasKey(partKey(id, epoch, owner, mw.w.ID())) {
		// Written once: a second SavePart is refused (unless GC removed
		// the part as a leftover, which the late GCs of the model do).
		if _, err := mw.w.SavePart(ctx, epoch, data); err == nil {
			m.t.Fatalf("worker %s saved its part of %s e%d twice", mw.w.ID(), id, epoch)
		}
		return
	}
	dir := filepath.Join(mw.w.StateDir(id), owner)
	_ = os.RemoveAll(mw.w.StateDir(id)) // an attempt under another epoch
	if err := os.MkdirAll(dir, 0o755); err != nil {
		m.t.Fatal(err)
	}
	want := map[string]string{}
	if last := mw.lastPart; last != "" && last != id {
		entries, _ := os.ReadDir(filepath.Join(mw.w.StateDir(last), owner))
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".sst") {
				from := filepath.Join(mw.w.StateDir(last), owner, e.Name())
				b, err := os.ReadFile(from)
				if err != nil {
					m.t.Fatal(err)
				}
				if err := os.Link(from, filepath.Join(dir, e.Name())); err != nil {
					m.t.Fatal(err)
				}
				want[e.Name()] = sha(string(b))
			}
		}
	}
	m.seq++
	files := map[string]string{
		fmt.Sprintf("%06d.sst", m.seq): strings.Repeat(fmt.Sprint(m.seq), 40),
		"MANIFEST":                     fmt.Sprintf("manifest %s %s e%d", mw.w.ID(), id, epoch),
	}
	for p, c := range files {
		if err := os.WriteFile(filepath.Join(dir, p), []byte(c), 0o644); err != nil {
			m.t.Fatal(err)
		}
		want[p] = sha(c)
	}
	wm.mu.Lock()
	wm.writing = &writeMark{worker: mw.w.ID(), zombie: mw.replaced, fenced: epoch < cur}
	wm.mu.Unlock()
	_, err := mw.w.SavePart(ctx, epoch, data)
	wm.mu.Lock()
	wm.writing = nil
	wm.mu.Unlock()
	if err != nil {
		m.t.Fatalf("worker %s SavePart %s e%d: %v", mw.w.ID(), id, epoch, err)
	}
	mw.parts[at], mw.gcsAt[at], mw.lastPart = want, m.lateGCs, id
}

// replace starts a new worker for a slot on an empty disk; the old one
// becomes a zombie. The new one restores its owner from the latest
// completed checkpoint, when that has it, and must get exactly its state.
func (wm *workerModel) replace(m *fenceModel) {
	slot := rapid.IntRange(0, len(wm.slots)-1).Draw(m.t, "slot")
	old := wm.slots[slot]
	old.replaced = true
	wm.zombies = append(wm.zombies, old)
	nw := wm.newWorker(m, slot)
	wm.slots[slot] = nw
	done, err := New(m.bs, "", Options{}).LoadLatestCompleted(ctx)
	if err != nil {
		m.t.Fatal(err)
	}
	owner := ownerOf(slot)
	if done == nil || done.StateDirs[owner] == "" {
		return
	}
	if err := nw.w.Restore(ctx, done.ID, []string{owner}); err != nil {
		m.t.Fatalf("worker restore of %s of %s: %v", owner, done.ID, err)
	}
	got := map[string]string{}
	root := filepath.Join(nw.w.StateDir(done.ID), owner)
	entries, _ := os.ReadDir(root)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(root, e.Name()))
		if err != nil {
			m.t.Fatal(err)
		}
		got[owner+"/"+e.Name()] = sha(string(b))
	}
	want := map[string]string{}
	for k, v := range m.want[done.ID] {
		if strings.HasPrefix(k, owner+"/") {
			want[k] = v
		}
	}
	if !maps.Equal(got, want) {
		m.t.Fatalf("worker restore of %s of %s = %v, want %v", owner, done.ID, got, want)
	}
	nw.lastPart = done.ID
}

// commit saves d by writer w with the live workers' assignment and says
// whether it committed, adding the parts to want. It must commit exactly
// when the writer is current and every live worker saved its part under
// the writer's epoch — unless a file a part reuses was deleted since
// (GC of an uncommitted part's upload), which Save must catch.
func (wm *workerModel) commit(m *fenceModel, w int, d *checkpoint.CheckpointData, want map[string]string) bool {
	s := m.writers[w]
	a := Assignment{}
	for i, mw := range wm.slots {
		a[ownerOf(i)] = mw.w.ID()
	}
	if err := s.Assign(a); err != nil {
		m.t.Fatal(err)
	}
	defer func() { _ = s.Assign(nil) }()
	err := s.Save(ctx, d)
	if !m.acquired[w] || w != m.current {
		return m.expect(w, "commit "+d.ID, err)
	}
	epoch, complete := s.Epoch(), true
	for _, mw := range wm.slots {
		if _, ok := mw.parts[partAt{d.ID, epoch}]; !ok {
			complete = false
		}
	}
	switch {
	case complete && err == nil:
		for i, mw := range wm.slots {
			for p, h := range mw.parts[partAt{d.ID, epoch}] {
				want[ownerOf(i)+"/"+p] = h
			}
		}
		return true
	case !complete && errors.Is(err, ErrPartMissing):
		return false
	case !complete:
		m.t.Fatalf("commit %s e%d without every part = %v, want ErrPartMissing", d.ID, epoch, err)
	case errors.Is(err, ErrPartMissing) && wm.partReusesDeleted(m, s, d.ID, epoch):
		return false
	default:
		m.t.Fatalf("commit %s e%d with every part: %v", d.ID, epoch, err)
	}
	return false
}

// partReusesDeleted reports whether a live worker's part of id, or a file
// it reuses, is no longer in the store. A part itself is gone only if a
// GC past the grace period ran after it was saved (an uncommitted part
// is then a leftover).
func (wm *workerModel) partReusesDeleted(m *fenceModel, s *Storage, id string, epoch uint64) bool {
	for i, mw := range wm.slots {
		p, err := s.readPart(ctx, id, epoch, ownerOf(i), mw.w.ID())
		if errors.Is(err, ErrPartMissing) && m.lateGCs > mw.gcsAt[partAt{id, epoch}] {
			return true
		}
		if err != nil {
			m.t.Fatal(err)
		}
		for _, f := range p.Files {
			if ok, err := m.bs.Exists(ctx, f.Key); err != nil {
				m.t.Fatal(err)
			} else if !ok {
				return true
			}
		}
	}
	return false
}

// check asserts, for every record the model committed that is still in
// the store: it holds exactly what was saved (the parts' state for the
// workers' owners), every file verifies, and none was written by a
// replaced worker after its replacement or under a fenced epoch.
func (wm *workerModel) check(m *fenceModel, reader *Storage) {
	ids, err := reader.IDs(ctx)
	if err != nil {
		m.t.Fatal(err)
	}
	for _, id := range ids {
		want, ok := m.want[id]
		if !ok {
			continue
		}
		rec, err := reader.LoadRecord(ctx, id)
		if err != nil {
			m.t.Fatal(err)
		}
		got := map[string]string{}
		for owner, refs := range rec.Files {
			for _, f := range refs {
				got[owner+"/"+f.Path] = f.SHA256
				wm.mu.Lock()
				mark, ok := wm.keys[f.Key]
				wm.mu.Unlock()
				if ok && (mark.zombie || mark.fenced) {
					m.t.Fatalf("%s commits %s, written by worker %s (replaced %v, fenced epoch %v)", id, f.Key, mark.worker, mark.zombie, mark.fenced)
				}
			}
		}
		if !maps.Equal(got, want) {
			m.t.Fatalf("%s records %v, saved %v", id, got, want)
		}
		if err := reader.Verify(ctx, id); err != nil {
			m.t.Fatalf("committed %s does not verify: %v", id, err)
		}
	}
}

func (m *fenceModel) hasKey(key string) bool {
	ok, err := m.bs.Exists(ctx, key)
	if err != nil {
		m.t.Fatal(err)
	}
	return ok
}
