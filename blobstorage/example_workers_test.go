package blobstorage_test

import (
	"context"
	"fmt"
	"log"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore/memstore"
	"github.com/tidemark-io/tidemark/checkpoint"
)

// writeTable stands for the state a worker's operator wrote (a Pebble
// checkpoint in practice) under StateDir(id)/<owner>.
func writeTable(w *blobstorage.Worker, id, owner, content string) {
	dir := filepath.Join(w.StateDir(id), owner)
	_ = os.MkdirAll(dir, 0o755)
	_ = os.WriteFile(filepath.Join(dir, "000001.sst"), []byte(content), 0o644)
}

// A job spanning hosts: a coordinator holds the writer role, two workers
// each save the state of the owners they run, and the coordinator
// commits the checkpoint once every part is in. A replaced worker
// restores only its owners on an empty disk; the job then resumes with
// three workers instead of two (rescale).
func Example_workers() {
	ctx := context.Background()
	bucket := memstore.New() // s3store or filestore in production
	dir, _ := os.MkdirTemp("", "workers-example-")
	defer os.RemoveAll(dir)
	node := func(name string) string { return filepath.Join(dir, name) }

	// The coordinator takes the writer role; its epoch goes to the workers
	// with the checkpoint barrier (over any transport).
	coord := blobstorage.New(bucket, node("coordinator"), blobstorage.Options{})
	epoch, err := coord.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	w1, _ := blobstorage.NewWorker(bucket, node("host-1"), blobstorage.NewWorkerID("worker-1"), blobstorage.Options{})
	w2, _ := blobstorage.NewWorker(bucket, node("host-2"), blobstorage.NewWorkerID("worker-2"), blobstorage.Options{})
	if err := coord.Assign(blobstorage.Assignment{"a": w1.ID(), "b": w1.ID(), "c": w2.ID()}); err != nil {
		log.Fatal(err)
	}

	// Each worker saves its owners' part of checkpoint 1.
	id := checkpoint.NewID(1)
	for w, owners := range map[*blobstorage.Worker][]string{w1: {"a", "b"}, w2: {"c"}} {
		dirs := map[string]string{}
		for _, o := range owners {
			writeTable(w, id, o, "state of "+o)
			dirs[o] = o
		}
		if _, err := w.SavePart(ctx, epoch, &checkpoint.CheckpointData{ID: id, StateDirs: dirs}); err != nil {
			log.Fatal(err)
		}
	}
	// The coordinator commits: one GET per owner finds the parts.
	err = coord.Save(ctx, &checkpoint.CheckpointData{
		ID:     id,
		Source: map[string][]byte{checkpoint.SourceOffsetsKey: []byte("offset=1000")},
		Status: checkpoint.StatusCompleted,
	})
	if err != nil {
		log.Fatal(err)
	}
	rec, _ := coord.LoadRecord(ctx, id)
	fmt.Println("committed", rec.ID, "owners", slices.Sorted(maps.Keys(rec.StateDirs)))

	// worker-2's host dies; its replacement, with a new id and an empty
	// disk, restores only owner c.
	w2b, _ := blobstorage.NewWorker(bucket, node("host-2b"), blobstorage.NewWorkerID("worker-2"), blobstorage.Options{})
	if err := w2b.Restore(ctx, id, []string{"c"}); err != nil {
		log.Fatal(err)
	}
	entries, _ := os.ReadDir(w2b.StateDir(id))
	c, _ := os.ReadFile(filepath.Join(w2b.StateDir(id), "c", "000001.sst"))
	fmt.Println("replacement restored", len(entries), "owner:", string(c))

	// Rescale: the job resumes with three workers, one owner each.
	coord2 := blobstorage.New(bucket, node("coordinator-2"), blobstorage.Options{})
	epoch2, _ := coord2.Acquire(ctx)
	next := checkpoint.NewID(2)
	assign := blobstorage.Assignment{}
	for i, o := range []string{"a", "b", "c"} {
		w, _ := blobstorage.NewWorker(bucket, node(fmt.Sprint("new-host-", i)), blobstorage.NewWorkerID(fmt.Sprint("worker-", i)), blobstorage.Options{})
		if err := w.Restore(ctx, id, []string{o}); err != nil {
			log.Fatal(err)
		}
		writeTable(w, next, o, "state of "+o+", later")
		if _, err := w.SavePart(ctx, epoch2, &checkpoint.CheckpointData{ID: next, StateDirs: map[string]string{o: o}}); err != nil {
			log.Fatal(err)
		}
		assign[o] = w.ID()
	}
	_ = coord2.Assign(assign)
	if err := coord2.Save(ctx, &checkpoint.CheckpointData{ID: next, Status: checkpoint.StatusCompleted}); err != nil {
		log.Fatal(err)
	}
	rec2, _ := coord2.LoadRecord(ctx, next)
	workers := map[string]bool{}
	for _, w := range rec2.Workers {
		workers[w] = true
	}
	fmt.Println("committed", rec2.ID, "with", len(workers), "workers")
	// Output:
	// committed ckpt-00000000000000000001 owners [a b c]
	// replacement restored 1 owner: state of c
	// committed ckpt-00000000000000000002 with 3 workers
}
