package blobstorage

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
	"github.com/tidemark-io/tidemark/checkpoint"
)

// fenceModel drives several writers of one store through random
// interleavings of their operations.
type fenceModel struct {
	t        *rapid.T
	bs       *spy
	writers  []*Storage
	acquired []bool
	current  int                          // the last writer to Acquire, -1 none
	lastSave []string                     // per writer: its last saved id (for hard links)
	want     map[string]map[string]string // id → owner/path → sha256 of what was saved
	seq      int                          // makes every new table unique
	latest   string                       // last observed _latest id
	done     string                       // last observed _latest-completed id
	wm       *workerModel                 // the job's workers (worker_fence_test.go)
	lateGCs  int                          // GCs run past the grace period so far
}

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// expect checks err against what the model says op by writer w must do:
// ErrNotWriter before Acquire, checkpoint.ErrFenced once another writer acquired
// after it, success for the current writer.
func (m *fenceModel) expect(w int, op string, err error) bool {
	switch {
	case !m.acquired[w]:
		if !errors.Is(err, ErrNotWriter) {
			m.t.Fatalf("writer %d %s before Acquire = %v, want ErrNotWriter", w, op, err)
		}
		return false
	case w != m.current:
		if !errors.Is(err, checkpoint.ErrFenced) {
			m.t.Fatalf("fenced writer %d %s = %v, want checkpoint.ErrFenced", w, op, err)
		}
		return false
	case err != nil:
		m.t.Fatalf("current writer %d %s: %v", w, op, err)
	}
	return true
}

func (m *fenceModel) acquire(w int) {
	if _, err := m.writers[w].Acquire(ctx); err != nil {
		m.t.Fatalf("writer %d Acquire: %v", w, err)
	}
	m.acquired[w], m.current = true, w
}

// restart replaces writer w by a new process on the same local disk: no
// cache, no epoch.
func (m *fenceModel) restart(w int) {
	m.writers[w] = New(m.bs, m.writers[w].LocalDir(), Options{Keep: 2, Concurrency: 2})
	m.acquired[w] = false
	if m.current == w {
		m.current = -1
	}
}

// save saves the next checkpoint by writer w: owner "w" from its disk
// and, with parts, the workers' owners from their parts.
func (m *fenceModel) save(w int, completed, parts bool) {
	s := m.writers[w]
	prev, err := s.Load(ctx)
	if err != nil {
		m.t.Fatalf("Load: %v", err)
	}
	id, err := checkpoint.NextID(idOrEmpty(prev))
	if err != nil {
		m.t.Fatal(err)
	}
	m.seq++
	files := map[string]string{
		fmt.Sprintf("%06d.sst", m.seq): strings.Repeat(fmt.Sprint(m.seq), 50),
		"MANIFEST":                     "manifest " + id,
	}
	dir := filepath.Join(s.StateDir(id), "w")
	_ = os.RemoveAll(s.StateDir(id)) // a failed attempt by this writer
	if err := os.MkdirAll(dir, 0o755); err != nil {
		m.t.Fatal(err)
	}
	want := map[string]string{}
	// Hard-link the tables of this writer's previous checkpoint, as
	// Pebble does: unchanged tables keep their identity.
	if last := m.lastSave[w]; last != "" {
		entries, _ := os.ReadDir(filepath.Join(s.StateDir(last), "w"))
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".sst") {
				from := filepath.Join(s.StateDir(last), "w", e.Name())
				b, err := os.ReadFile(from)
				if err != nil {
					m.t.Fatal(err)
				}
				if err := os.Link(from, filepath.Join(dir, e.Name())); err != nil {
					m.t.Fatal(err)
				}
				want["w/"+e.Name()] = sha(string(b))
			}
		}
	}
	for p, c := range files {
		if err := os.WriteFile(filepath.Join(dir, p), []byte(c), 0o644); err != nil {
			m.t.Fatal(err)
		}
		want["w/"+p] = sha(c)
	}
	d := record(id, checkpoint.StatusPrepared)
	if completed {
		d.Status = checkpoint.StatusCompleted
	}
	d.StateDirs = map[string]string{"w": "w"}
	var committed bool
	if parts {
		committed = m.wm.commit(m, w, d, want)
	} else {
		committed = m.expect(w, "Save "+id, s.Save(ctx, d))
	}
	if committed {
		m.want[id] = want
		m.lastSave[w] = id
	}
}

func idOrEmpty(d *checkpoint.CheckpointData) string {
	if d == nil {
		return ""
	}
	return d.ID
}

func (m *fenceModel) promote(w int) {
	latest, err := m.writers[w].Load(ctx)
	if err != nil {
		m.t.Fatalf("Load: %v", err)
	}
	if latest == nil {
		return
	}
	m.expect(w, "UpdateStatus "+latest.ID, m.writers[w].UpdateStatus(ctx, latest.ID, checkpoint.StatusCompleted))
}

func (m *fenceModel) gc(w int, late bool) {
	opts := GCOptions{}
	if late {
		opts.Now = time.Now().Add(3 * time.Hour)
	}
	_, err := m.writers[w].GC(ctx, opts)
	if !m.acquired[w] {
		// An operator's GC beside the writers: it needs no role, and
		// the invariants must hold after it all the same.
		if err != nil {
			m.t.Fatalf("writer %d GC before Acquire (an operator's GC): %v", w, err)
		}
		return
	}
	if m.expect(w, "GC", err) && late {
		m.lateGCs++
	}
}

// check asserts the invariants: pointers never move backwards; the latest
// completed checkpoint is a completed record holding exactly the files
// that were saved, all present and matching their digests.
func (m *fenceModel) check() {
	reader := New(m.bs, "", Options{})
	latest, err := reader.Load(ctx)
	if err != nil {
		m.t.Fatalf("Load: %v", err)
	}
	done, err := reader.LoadLatestCompleted(ctx)
	if err != nil {
		m.t.Fatalf("LoadLatestCompleted: %v", err)
	}
	if id := idOrEmpty(latest); id < m.latest {
		m.t.Fatalf("_latest moved back from %s to %s", m.latest, id)
	} else {
		m.latest = id
	}
	if id := idOrEmpty(done); id < m.done {
		m.t.Fatalf("_latest-completed moved back from %s to %s", m.done, id)
	} else {
		m.done = id
	}
	m.wm.check(m, reader)
	if done == nil {
		return
	}
	if !done.Completed() {
		m.t.Fatalf("_latest-completed names %s, status %q", done.ID, done.Status)
	}
	files, err := reader.Files(ctx, done.ID)
	if err != nil {
		m.t.Fatal(err)
	}
	got := map[string]string{}
	for owner, refs := range files {
		for _, f := range refs {
			got[owner+"/"+f.Path] = f.SHA256
		}
	}
	if want := m.want[done.ID]; !maps.Equal(got, want) {
		m.t.Fatalf("%s records %v, saved %v", done.ID, got, want)
	}
	if err := reader.Verify(ctx, done.ID); err != nil {
		m.t.Fatalf("latest completed %s does not verify: %v", done.ID, err)
	}
}

func TestBlobStorageFencingProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(2, 3).Draw(rt, "writers")
		m := &fenceModel{t: rt, bs: newBlobSpy(newMem()), current: -1, want: map[string]map[string]string{},
			acquired: make([]bool, n), lastSave: make([]string, n)}
		root, err := os.MkdirTemp("", "fence-model-")
		if err != nil {
			rt.Fatal(err)
		}
		defer os.RemoveAll(root)
		m.wm = newWorkerModel(m, filepath.Join(root, "workers"), 2)
		for i := range n {
			m.writers = append(m.writers, New(m.bs, filepath.Join(root, fmt.Sprint(i)), Options{Keep: 2, Concurrency: 2}))
		}
		ops := []string{"acquire", "save-prepared", "save-completed", "promote", "gc", "gc-late", "restart",
			"part", "part-zombie", "replace-worker", "commit-prepared", "commit-completed", "round", "round"}
		steps := rapid.IntRange(1, 30).Draw(rt, "steps")
		for range steps {
			w := rapid.IntRange(0, n-1).Draw(rt, "writer")
			switch op := rapid.SampledFrom(ops).Draw(rt, "op"); op {
			case "acquire":
				m.acquire(w)
			case "save-prepared", "save-completed":
				m.save(w, op == "save-completed", false)
			case "commit-prepared", "commit-completed":
				m.save(w, op == "commit-completed", true)
			case "round":
				// Every live worker saves its part, then writer w commits.
				m.wm.round(m)
				m.save(w, rapid.Bool().Draw(rt, "completed"), true)
			case "part", "part-zombie":
				m.wm.part(m, op == "part-zombie")
			case "replace-worker":
				m.wm.replace(m)
			case "promote":
				m.promote(w)
			case "gc", "gc-late":
				m.gc(w, op == "gc-late")
			case "restart":
				m.restart(w)
			}
			m.check()
		}
	})
}

// Two writers racing Acquire: exactly one ends up current, and the
// other's writes are fenced.
func TestBlobStorageConcurrentAcquireLeavesOneWriter(t *testing.T) {
	bs := newMem()
	a := New(bs, t.TempDir(), Options{})
	b := New(bs, t.TempDir(), Options{})
	errs := make(chan error, 2)
	for _, s := range []*Storage{a, b} {
		go func() { _, err := s.Acquire(ctx); errs <- err }()
	}
	for range 2 {
		if err := <-errs; err != nil && !errors.Is(err, checkpoint.ErrFenced) {
			t.Fatalf("Acquire: %v", err)
		}
	}
	var ok []string
	for name, s := range map[string]*Storage{"a": a, "b": b} {
		_, err := s.GC(ctx, GCOptions{})
		switch {
		case err == nil:
			ok = append(ok, name)
		case !errors.Is(err, checkpoint.ErrFenced):
			t.Errorf("%s GC: %v", name, err)
		}
	}
	if slices.Sort(ok); len(ok) != 1 {
		t.Fatalf("writers able to write: %v, want exactly one", ok)
	}
}

// A writer that was fenced and takes over again must not trust what it
// remembers: the other writer's GC may have deleted the tables it
// uploaded. Its next checkpoint uploads them again.
func TestBlobStorageWriterTakingOverAgainRechecksRememberedTables(t *testing.T) {
	bs := newMem()
	a := newWriter(t, bs, Options{Keep: 1})
	saveState(t, a, checkpoint.NewID(1), checkpoint.StatusCompleted, c1Files)
	b := newWriter(t, bs, Options{Keep: 1})
	saveState(t, b, checkpoint.NewID(2), checkpoint.StatusCompleted, stateFiles{"w0": {"b.sst": "b"}})
	if _, err := b.GC(ctx, GCOptions{Now: time.Now().Add(2 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	saveState(t, a, checkpoint.NewID(3), checkpoint.StatusCompleted, stateFiles{"w0": {"000001.sst": "link:" + checkpoint.NewID(1)}})
	if err := a.Verify(ctx, checkpoint.NewID(3)); err != nil {
		t.Fatalf("checkpoint references a table the other writer's GC deleted: %v", err)
	}
}

// Acquire checks the store's conditional writes before its first write,
// through any chain of decorators, and refuses, writing nothing, on an
// endpoint that ignores them or cannot be probed.
func TestAcquireProbesTheStoreThroughAnyDecorator(t *testing.T) {
	wraps := map[string]func(blobstore.Blobstore) blobstore.Blobstore{
		"plain": func(bs blobstore.Blobstore) blobstore.Blobstore { return bs },
		"WithPrefix": func(bs blobstore.Blobstore) blobstore.Blobstore {
			p, err := blobstore.WithPrefix(bs, "jobs/a")
			if err != nil {
				t.Fatal(err)
			}
			return p
		},
		"Observe": func(bs blobstore.Blobstore) blobstore.Blobstore {
			return blobstore.Observe(bs, countingObserver{})
		},
		"ObserveOverPrefixOverResuming": func(bs blobstore.Blobstore) blobstore.Blobstore {
			p, err := blobstore.WithPrefix(blobstore.WithResumingReads(bs, 2), "jobs/a")
			if err != nil {
				t.Fatal(err)
			}
			return blobstore.Observe(p, countingObserver{})
		},
	}
	for name, wrap := range wraps {
		for _, tc := range []struct {
			probeErr error
			want     error // nil: Acquire succeeds
		}{
			{probeErr: nil},
			{probeErr: fmt.Errorf("s3store: %w: If-None-Match ignored", blobstore.ErrConditionsIgnored), want: blobstore.ErrConditionsIgnored},
			{probeErr: errors.New("endpoint unreachable"), want: errors.New("could not check")},
		} {
			t.Run(fmt.Sprintf("%s/%v", name, tc.probeErr), func(t *testing.T) {
				base := blobstoretest.NewCapable()
				base.ProbeErr = tc.probeErr
				s := New(wrap(base), t.TempDir(), Options{})
				_, err := s.Acquire(t.Context())
				switch {
				case tc.want == nil && err != nil:
					t.Fatalf("Acquire: %v", err)
				case tc.want == nil:
					if _, err := s.Acquire(t.Context()); err != nil {
						t.Fatalf("second Acquire: %v", err)
					}
					if n := base.Probes(); n != 1 {
						t.Fatalf("the store was probed %d times over two Acquires, want once", n)
					}
					return
				case err == nil:
					t.Fatal("Acquire succeeded on a store whose probe failed")
				case errors.Is(tc.want, blobstore.ErrConditionsIgnored) && !errors.Is(err, blobstore.ErrConditionsIgnored):
					t.Fatalf("Acquire: %v, want ErrConditionsIgnored", err)
				case !strings.Contains(err.Error(), "conditional writes"):
					t.Fatalf("Acquire: %v: the error should say what could not be checked", err)
				}
				if keys := blobstoretest.ListKeys(t, base, ""); len(keys) != 0 {
					t.Fatalf("a refused Acquire wrote %q", keys)
				}
			})
		}
	}
}

// countingObserver observes nothing (a stand-in for metrics).
type countingObserver struct{}

func (countingObserver) Transferred(blobstore.Op, string, int)                  {}
func (countingObserver) Done(blobstore.Op, string, int64, time.Duration, error) {}
