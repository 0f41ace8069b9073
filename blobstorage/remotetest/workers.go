package remotetest

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/state"
)

// RemoteWorker is one worker of a job in remote mode: a Worker and the
// live state of its owners, opened with the writer's generation.
type RemoteWorker struct {
	Worker *blobstorage.Worker
	State  *state.Store
	Owners []string
}

// StartRemoteWorker starts a worker on an empty disk for the owners,
// under the writer of epoch: fresh state, or (from != "") the owners of
// checkpoint from, restored (only their local part) and opened in remote
// mode.
func StartRemoteWorker(t *testing.T, bs blobstore.Blobstore, epoch uint64, slot, from string, owners []string) *RemoteWorker {
	t.Helper()
	ctx := t.Context()
	dir := t.TempDir()
	w, err := blobstorage.NewWorker(bs, filepath.Join(dir, "ckpt"), blobstorage.NewWorkerID(slot), blobstorage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	live := filepath.Join(dir, "live")
	var st *state.Store
	if from == "" {
		st, err = state.Open(live, StateOptions(bs, epoch))
	} else {
		if err := w.Restore(ctx, from, owners); err != nil {
			t.Fatalf("worker %s: Restore(%s, %v): %v", slot, from, owners, err)
		}
		st, err = state.OpenCheckpoint(ctx, w.StateDir(from), live, StateOptions(bs, epoch))
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	for _, o := range owners {
		if _, err := st.Owner(o); err != nil {
			t.Fatal(err)
		}
	}
	w.UseRemote(st.CheckpointRemote())
	return &RemoteWorker{Worker: w, State: st, Owners: owners}
}

// writeOwners sets keys [from, to) of seed in each of owners of st, as
// Job.Write does.
func writeOwners(t *testing.T, st *state.Store, owners []string, m Model, seed, from, to uint64) {
	t.Helper()
	for _, owner := range owners {
		o, err := st.Owner(owner)
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

// CheckpointByParts has every worker checkpoint its owners and save its
// part concurrently, then commits checkpoint seq on the writer w.
func CheckpointByParts(t *testing.T, w *blobstorage.Storage, workers []*RemoteWorker, seq uint64) string {
	t.Helper()
	id := checkpoint.NewID(seq)
	a := blobstorage.Assignment{}
	for _, rw := range workers {
		for _, o := range rw.Owners {
			a[o] = rw.Worker.ID()
		}
	}
	if err := w.Assign(a); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(workers))
	for i, rw := range workers {
		wg.Go(func() {
			dirs, err := rw.State.Checkpoint(context.Background(), rw.Worker.StateDir(id))
			if err == nil {
				_, err = rw.Worker.SavePart(context.Background(), w.Epoch(), &checkpoint.CheckpointData{ID: id, StateDirs: dirs})
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("SavePart(%s): %v", id, err)
		}
	}
	err := w.Save(t.Context(), &checkpoint.CheckpointData{
		ID: id, Timestamp: time.Now().UTC(), Status: checkpoint.StatusCompleted,
		Source: map[string][]byte{checkpoint.SourceOffsetsKey: []byte(id)},
	})
	if err != nil {
		t.Fatalf("commit %s: %v", id, err)
	}
	return id
}

// newWriter takes the writer role on bs on an empty node.
func newWriter(t *testing.T, bs blobstore.Blobstore) *blobstorage.Storage {
	t.Helper()
	w := blobstorage.New(bs, t.TempDir(), blobstorage.Options{})
	if _, err := w.Acquire(t.Context()); err != nil {
		t.Fatal(err)
	}
	return w
}

// WorkersRescaleInPlace: workers in remote mode hand their objects over
// in their parts, so the checkpoint references them without uploading a
// table. The job then resumes with fewer workers (2 → 1) and with more
// (1 → 2), each time under a new writer on empty disks: every worker
// opens the owners it gains from the objects in place, reading no table
// whole before its first read, and reads exactly what was written. A GC
// past the grace period leaves everything the job still reads.
func WorkersRescaleInPlace(t *testing.T, bs blobstore.Blobstore) {
	ctx := t.Context()
	reads := &readLog{Blobstore: bs}
	m := Model{}

	w1 := newWriter(t, reads)
	two := []*RemoteWorker{
		StartRemoteWorker(t, reads, w1.Epoch(), "a", "", Owners[:1]),
		StartRemoteWorker(t, reads, w1.Epoch(), "b", "", Owners[1:]),
	}
	for i, rw := range two {
		writeOwners(t, rw.State, rw.Owners, m, uint64(i+1), 0, 2000)
	}
	id1 := CheckpointByParts(t, w1, two, 1)
	rec, err := w1.LoadRecord(ctx, id1)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range Owners {
		if len(rec.Remote[o]) == 0 {
			t.Fatalf("checkpoint %s references no remote object of owner %q: %v", id1, o, rec.Remote)
		}
		for _, f := range rec.Files[o] {
			if strings.HasSuffix(f.Path, ".sst") {
				t.Errorf("checkpoint %s uploaded table %s of owner %q", id1, f.Path, o)
			}
		}
	}

	// Fewer workers: one runs both owners.
	w2 := newWriter(t, reads)
	reads.reset()
	one := []*RemoteWorker{StartRemoteWorker(t, reads, w2.Epoch(), "solo", id1, Owners)}
	reads.noTableRead(t, "resuming 2 → 1 worker")
	if err := ReadModel(t, one[0].State, m); err != nil {
		t.Fatal(err)
	}
	writeOwners(t, one[0].State, Owners, m, 7, 1000, 3000)
	id2 := CheckpointByParts(t, w2, one, 2)

	// More workers: each takes one owner back.
	w3 := newWriter(t, reads)
	reads.reset()
	again := []*RemoteWorker{
		StartRemoteWorker(t, reads, w3.Epoch(), "a", id2, Owners[:1]),
		StartRemoteWorker(t, reads, w3.Epoch(), "b", id2, Owners[1:]),
	}
	reads.noTableRead(t, "resuming 1 → 2 workers")
	for _, rw := range again {
		if err := ReadModel(t, rw.State, only(m, rw.Owners)); err != nil {
			t.Fatal(err)
		}
	}
	id3 := CheckpointByParts(t, w3, again, 3)

	// The writer's GC, past the grace period, keeps what the workers'
	// open databases use (their generation is the writer's) and what the
	// retained checkpoints reference.
	if _, err := w3.GC(ctx, blobstorage.GCOptions{Now: PastGrace()}); err != nil {
		t.Fatal(err)
	}
	for _, rw := range again {
		if err := ReadModel(t, rw.State, only(m, rw.Owners)); err != nil {
			t.Fatalf("read after GC: %v", err)
		}
	}
	for _, id := range []string{id2, id3} {
		if err := w3.Verify(ctx, id); err != nil {
			t.Errorf("verify %s after GC: %v", id, err)
		}
	}
}

func only(m Model, owners []string) Model {
	out := Model{}
	for _, o := range owners {
		out[o] = m[o]
	}
	return out
}

// readLog records the keys read whole (Get) and the bytes read by range.
type readLog struct {
	blobstore.Blobstore
	mu     sync.Mutex
	whole  []string
	ranged int64
}

func (r *readLog) Unwrap() blobstore.Blobstore { return r.Blobstore }

func (r *readLog) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.whole, r.ranged = nil, 0
}

func (r *readLog) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	r.mu.Lock()
	r.whole = append(r.whole, key)
	r.mu.Unlock()
	return r.Blobstore.Get(ctx, key)
}

func (r *readLog) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	r.mu.Lock()
	r.ranged += n
	r.mu.Unlock()
	return r.Blobstore.GetRange(ctx, key, off, n)
}

// noTableRead fails if a table or a remote object was read whole since
// the last reset.
func (r *readLog) noTableRead(t *testing.T, what string) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range r.whole {
		if strings.HasSuffix(k, ".sst") || strings.HasPrefix(k, blobstorage.RemotePrefix+"/") {
			t.Errorf("%s read %q whole before the first read", what, k)
		}
	}
	t.Logf("%s: %d objects read whole (records, parts, local files), %d bytes by range", what, len(r.whole), r.ranged)
}
