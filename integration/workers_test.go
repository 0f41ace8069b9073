package integration

import (
	"context"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/state"
)

// jobWorker is one worker process of a job in the test: a Worker and the
// live Pebble state of its owners.
type jobWorker struct {
	w      *blobstorage.Worker
	st     *state.Store
	owners []string
}

// startWorker opens a worker for owners on an empty disk. With from set,
// it restores its owners of that checkpoint (saved with any assignment)
// and opens Pebble on them; otherwise it starts empty.
func startWorker(t *testing.T, bs blobstore.Blobstore, slot, from string, owners []string) *jobWorker {
	t.Helper()
	w, err := blobstorage.NewWorker(bs, t.TempDir(), blobstorage.NewWorkerID(slot), blobstorage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	live := filepath.Join(t.TempDir(), "live")
	var st *state.Store
	if from != "" {
		if err := w.Restore(t.Context(), from, owners); err != nil {
			t.Fatalf("worker %s Restore(%s, %v): %v", slot, from, owners, err)
		}
		st, err = state.OpenCheckpoint(t.Context(), w.StateDir(from), live, pebbleTestOptions)
	} else {
		st, err = state.Open(live, pebbleTestOptions)
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
	return &jobWorker{w: w, st: st, owners: owners}
}

// runCheckpoint has every worker write new keys, save its part
// concurrently, and the coordinator commit; it returns the assignment.
func runCheckpoint(t *testing.T, coord *blobstorage.Storage, workers []*jobWorker, model kvModel, seed uint64, id string) (blobstorage.Assignment, []blobstorage.PartStats) {
	t.Helper()
	a := blobstorage.Assignment{}
	for _, jw := range workers {
		writeKeys(t, jw.st, model, jw.owners, seed, 0, 400, 100)
		writeKeys(t, jw.st, model, jw.owners, 1, seed*400, seed*400+400, 100)
		for _, o := range jw.owners {
			a[o] = jw.w.ID()
		}
	}
	if err := coord.Assign(a); err != nil {
		t.Fatal(err)
	}
	stats := make([]blobstorage.PartStats, len(workers))
	errs := make(chan error, len(workers))
	for i, jw := range workers {
		go func() {
			dirs, err := jw.st.Checkpoint(context.Background(), jw.w.StateDir(id))
			if err == nil {
				stats[i], err = jw.w.SavePart(context.Background(), coord.Epoch(), &checkpoint.CheckpointData{ID: id, StateDirs: dirs})
			}
			errs <- err
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Fatalf("SavePart(%s): %v", id, err)
		}
	}
	if err := coord.Save(t.Context(), completedRecord(id, nil)); err != nil {
		t.Fatalf("commit %s: %v", id, err)
	}
	return a, stats
}

// sameTables counts the tables (.sst) of checkpoint directory a that b
// holds unchanged: the same file, hard-linked by Pebble's checkpoints.
func sameTables(t *testing.T, a, b string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(a, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(p) != ".sst" {
			return err
		}
		rel, err := filepath.Rel(a, p)
		if err != nil {
			return err
		}
		fa, err := os.Stat(p)
		if err != nil {
			return err
		}
		if fb, err := os.Stat(filepath.Join(b, rel)); err == nil && os.SameFile(fa, fb) {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func only(m kvModel, owners ...string) kvModel {
	out := kvModel{}
	for _, o := range owners {
		out[o] = maps.Clone(m[o])
	}
	return out
}

// A job of four owners on two workers checkpoints to MinIO by parts; one
// worker is replaced by a fresh one on an empty disk that restores only
// its owners and carries on; the job then resumes on three workers
// (owners split differently) and on one (all merged). Every checkpoint
// restores to exactly the state its workers had, the commit sends no
// LIST, and the records name the assignment they were saved with.
func TestWorkersSaveByPartsRestorePerWorkerAndRescaleOnMinIO(t *testing.T) {
	bs, requests := countedBucket(t, 0)
	coord := acquiredWriter(t, bs, blobstorage.Options{})
	owners := []string{"op-0", "op-1", "op-2", "op-3"}
	model := kvModel{}
	workers := []*jobWorker{
		startWorker(t, bs, "worker-1", "", owners[:2]),
		startWorker(t, bs, "worker-2", "", owners[2:]),
	}
	id1, id2, id3, id4 := checkpoint.NewID(1), checkpoint.NewID(2), checkpoint.NewID(3), checkpoint.NewID(4)

	before := requests.snapshot()
	a1, _ := runCheckpoint(t, coord, workers, model, 1, id1)
	if n := requests.snapshot()[kindList] - before[kindList]; n != 0 {
		t.Errorf("saving by parts and committing sent %d LIST requests, want none", n)
	}
	want1 := model.clone()
	sameKV(t, "whole-job restore of "+id1, readPebble(t, restoreOnEmptyNode(t, bs, id1)), want1)
	rec1, err := coord.LoadRecord(t.Context(), id1)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(rec1.Workers, a1) {
		t.Fatalf("record of %s names workers %v, want %v", id1, rec1.Workers, a1)
	}

	// worker-2's host dies: a fresh worker restores only op-2 and op-3.
	workers[1] = startWorker(t, bs, "worker-2", id1, owners[2:])
	sameKV(t, "worker restore of op-2, op-3", readPebble(t, workers[1].w.StateDir(id1)), only(want1, owners[2:]...))
	_, stats := runCheckpoint(t, coord, workers, model, 2, id2)
	// Every restored table still in the new checkpoint is reused. A
	// background compaction may merge a restored table with the new flush
	// (the runs that failed here uploaded 12 files and reused none: one
	// table per owner): that table is new, and is uploaded.
	if kept := sameTables(t, workers[1].w.StateDir(id1), workers[1].w.StateDir(id2)); stats[1].ReusedFiles != kept {
		t.Errorf("the replacement reused %d files (%+v); %d restored tables are unchanged in %s and should all be", stats[1].ReusedFiles, stats[1], kept, id2)
	}
	sameKV(t, "whole-job restore of "+id2, readPebble(t, restoreOnEmptyNode(t, bs, id2)), model)

	// Rescale to three workers, under a new writer (the job restarted).
	coord2 := acquiredWriter(t, bs, blobstorage.Options{})
	split := [][]string{{"op-0"}, {"op-1", "op-2"}, {"op-3"}}
	var three []*jobWorker
	for i, os := range split {
		three = append(three, startWorker(t, bs, fmt.Sprint("worker-", i+1), id2, os))
	}
	a3, _ := runCheckpoint(t, coord2, three, model, 3, id3)
	rec3, err := coord2.LoadRecord(t.Context(), id3)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(rec3.Workers, a3) || len(slices.Compact(slices.Sorted(maps.Values(rec3.Workers)))) != 3 {
		t.Fatalf("record of %s names workers %v, want %v", id3, rec3.Workers, a3)
	}
	sameKV(t, "whole-job restore of "+id3, readPebble(t, restoreOnEmptyNode(t, bs, id3)), model)

	// And to one worker running all four owners.
	coord3 := acquiredWriter(t, bs, blobstorage.Options{})
	one := []*jobWorker{startWorker(t, bs, "solo", id3, owners)}
	runCheckpoint(t, coord3, one, model, 4, id4)
	sameKV(t, "whole-job restore of "+id4, readPebble(t, restoreOnEmptyNode(t, bs, id4)), model)
	// The older checkpoints still restore to their own state.
	sameKV(t, "whole-job restore of "+id1+" at the end", readPebble(t, restoreOnEmptyNode(t, bs, id1)), want1)
}
