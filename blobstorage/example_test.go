package blobstorage_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore/memstore"
	"github.com/tidemark-io/tidemark/checkpoint"
)

// A job on one node checkpoints into the object store; the node dies with
// its disk, and another node with an empty directory restores from the
// store. Any Blobstore works: memstore here, s3store or filestore in
// production.
func Example() {
	ctx := context.Background()
	bucket := memstore.New()
	dir, _ := os.MkdirTemp("", "blob-example-")
	defer os.RemoveAll(dir)

	// Node A takes the writer role (fencing any earlier writer) and saves a
	// checkpoint whose state it wrote under StateDir(id).
	nodeA := blobstorage.New(bucket, filepath.Join(dir, "node-a"), blobstorage.Options{})
	if _, err := nodeA.Acquire(ctx); err != nil {
		log.Fatal(err)
	}
	id := checkpoint.NewID(1)
	owner := filepath.Join(nodeA.StateDir(id), "counts")
	_ = os.MkdirAll(owner, 0o755)
	_ = os.WriteFile(filepath.Join(owner, "000001.sst"), []byte("hello=3"), 0o644)
	err := nodeA.Save(ctx, &checkpoint.CheckpointData{
		ID:        id,
		Source:    map[string][]byte{checkpoint.SourceOffsetsKey: []byte("offset=1000")},
		StateDirs: map[string]string{"counts": "counts"},
		Status:    checkpoint.StatusCompleted,
	})
	if err != nil {
		log.Fatal(err)
	}

	// Node B starts with an empty disk: it finds the latest completed
	// checkpoint in the store and downloads and verifies its state.
	nodeB := blobstorage.New(bucket, filepath.Join(dir, "node-b"), blobstorage.Options{})
	latest, err := nodeB.LoadLatestCompleted(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if err := checkpoint.Materialize(ctx, nodeB, latest); err != nil {
		log.Fatal(err)
	}
	state, _ := os.ReadFile(filepath.Join(nodeB.StateDir(latest.ID), "counts", "000001.sst"))
	fmt.Println(latest.ID, string(latest.Offsets()), string(state))
	// Output: ckpt-00000000000000000001 offset=1000 hello=3
}
