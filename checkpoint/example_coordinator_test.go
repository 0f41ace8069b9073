package checkpoint_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strconv"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore/memstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/state"
)

// The whole integration path of a stateful job: take the writer role,
// recover, abort what was abandoned, materialize the state, open it, seek
// the source, and checkpoint through the two-phase Coordinator. Node 2
// starts on an empty disk after node 1 died with its own.
func ExampleCoordinator() {
	ctx := context.Background()
	bucket := memstore.New() // s3store or filestore in production
	dir, _ := os.MkdirTemp("", "job-")
	defer os.RemoveAll(dir)
	committed := map[string]bool{} // the sink's durable record of its commits

	for node := 1; node <= 2; node++ {
		local := filepath.Join(dir, fmt.Sprint("node-", node))
		storage := blobstorage.New(bucket, filepath.Join(local, "checkpoints"), blobstorage.Options{})
		// 1. Take the writer role (checks conditional writes, fences the old node).
		if _, err := storage.Acquire(ctx); err != nil {
			log.Fatal(err)
		}
		// 2. Decide what to restore, asking the sink what committed.
		dec, err := checkpoint.Recover(ctx, storage, func(_ context.Context, cp *checkpoint.CheckpointData) (bool, error) {
			return committed[cp.ID], nil
		})
		if err != nil {
			log.Fatal(err)
		}
		// 3. Abort the transaction of an abandoned checkpoint (none here).
		if dec.Abandoned != nil {
			delete(committed, dec.Abandoned.ID)
		}
		// 4. Download the state on a node that does not have it, and 5. open it.
		if err := checkpoint.Materialize(ctx, storage, dec.Checkpoint); err != nil {
			log.Fatal(err)
		}
		live, offset := filepath.Join(local, "live"), 0
		var st *state.Store
		if dec.Checkpoint != nil {
			st, err = state.OpenCheckpoint(ctx, storage.StateDir(dec.Checkpoint.ID), live, state.Options{})
			// 6. Seek the source to the checkpoint's offsets.
			offset, _ = strconv.Atoi(string(dec.Checkpoint.Offsets()))
		} else {
			st, err = state.Open(live, state.Options{})
		}
		if err != nil {
			log.Fatal(err)
		}
		start := offset
		// 7. Wire the Coordinator to the sink and run two checkpoints.
		c := checkpoint.NewCoordinator(storage, "txn")
		c.CommitSink = func(_ context.Context, id string) error { committed[id] = true; return nil }
		done := make(chan string, 1)
		c.OnCompleted = func(id string) { done <- id }
		c.Start(ctx)
		owner, _ := st.Owner("counter")
		prev := ""
		if dec.Latest != nil {
			prev = dec.Latest.ID
		}
		for range 2 {
			offset += 100 // read and process 100 records
			_ = owner.Set([]byte("count"), []byte(strconv.Itoa(offset)))
			id, _ := checkpoint.NextID(prev)
			prev = id
			c.OnBarrierInjected(id, []byte(strconv.Itoa(offset)))
			dirs, err := st.Checkpoint(ctx, storage.StateDir(id))
			c.OnStateSnapshot(id, nil, dirs)
			c.OnSinkPrepared(id, err)
			select {
			case <-done:
			case err := <-c.Fatal():
				log.Fatal(err)
			}
		}
		c.Stop()
		count, _, _ := owner.Get([]byte("count"))
		fmt.Printf("node %d: started at %d, count %s\n", node, start, count)
		_ = st.Close()
		_ = os.RemoveAll(local) // the node dies with its disk
	}
	// Output:
	// node 1: started at 0, count 200
	// node 2: started at 200, count 400
}
