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

// The integration path of a stateful job by hand: take the writer role,
// recover rolling forward, materialize the state and open it from the
// checkpoint, seek the source, and checkpoint through the two-phase
// Coordinator. Package job does all of this; use it unless you need this
// lower level. Node 1 crashes and restarts on its own disk, whose live
// state and a state directory of the next id are stale; then node 2
// starts on an empty disk.
func ExampleCoordinator() {
	ctx := context.Background()
	bucket := memstore.New() // s3store or filestore in production
	dir, _ := os.MkdirTemp("", "job-")
	defer os.RemoveAll(dir)
	committed := map[string]bool{} // the sink's durable record of its commits

	for start, disk := range []string{"node-1", "node-1", "node-2"} {
		local := filepath.Join(dir, disk)
		storage := blobstorage.New(bucket, filepath.Join(local, "checkpoints"), blobstorage.Options{})
		// 1. Take the writer role (checks conditional writes, fences the old node).
		if _, err := storage.Acquire(ctx); err != nil {
			log.Fatal(err)
		}
		// 2. Roll forward: a prepared record is the commit decision, so
		// commit its transaction again (idempotently) and restore it.
		dec, err := checkpoint.Recover(ctx, storage, func(_ context.Context, cp *checkpoint.CheckpointData) (bool, error) {
			committed[cp.ID] = true
			return true, nil
		})
		if err != nil {
			log.Fatal(err)
		}
		// 3. Download the state on a node that does not have it, and 4.
		// open it from the checkpoint, always: the live directory of a
		// restart holds writes made after the checkpoint.
		if err := checkpoint.Materialize(ctx, storage, dec.Checkpoint); err != nil {
			log.Fatal(err)
		}
		live, offset := filepath.Join(local, "live"), 0
		_ = os.RemoveAll(live)
		var st *state.Store
		if dec.Checkpoint != nil {
			st, err = state.OpenCheckpoint(ctx, storage.StateDir(dec.Checkpoint.ID), live, state.Options{})
			// 5. Seek the source to the checkpoint's offsets.
			offset, _ = strconv.Atoi(string(dec.Checkpoint.Offsets()))
		} else {
			st, err = state.Open(live, state.Options{})
		}
		if err != nil {
			log.Fatal(err)
		}
		from := offset
		// 6. Wire the Coordinator to the sink: commit only. No abort: a
		// failed persist of a prepared record may still have landed.
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
			// 7. A local state directory of a new id is a crashed start's
			// leftover: remove it, or the snapshot refuses.
			_ = storage.RemoveStateDir(id)
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
		fmt.Printf("start %d on %s: from %d, count %s\n", start+1, disk, from, count)
		if start == 0 { // 50 more records, a snapshot of the next id, then a crash
			_ = owner.Set([]byte("count"), []byte(strconv.Itoa(offset+50)))
			next, _ := checkpoint.NextID(prev)
			_, _ = st.Checkpoint(ctx, storage.StateDir(next))
		}
		_ = st.Close()
	}
	// Output:
	// start 1 on node-1: from 0, count 200
	// start 2 on node-1: from 200, count 400
	// start 3 on node-2: from 400, count 600
}
