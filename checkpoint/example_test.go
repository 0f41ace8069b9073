package checkpoint_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/tidemark-io/tidemark/blobstore/memstore"
	"github.com/tidemark-io/tidemark/checkpoint"
)

func ExampleFileStorage() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "ckpt-example-")
	defer os.RemoveAll(dir)

	s := checkpoint.NewFileStorage(dir)
	if err := s.SweepOrphans(ctx); err != nil { // once, at startup
		log.Fatal(err)
	}
	id, _ := checkpoint.NextID("") // first checkpoint of a fresh job
	err := s.Save(ctx, &checkpoint.CheckpointData{
		ID:        id,
		Operators: map[string][]byte{"0": []byte("running-sum=42")},
		Source:    map[string][]byte{checkpoint.SourceOffsetsKey: []byte("offset=1000")},
		Status:    checkpoint.StatusCompleted,
	})
	if err != nil {
		log.Fatal(err)
	}
	cp, err := s.LoadLatestCompleted(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(cp.ID, string(cp.Operators["0"]), string(cp.Offsets()))
	// Output: ckpt-00000000000000000001 running-sum=42 offset=1000
}

func ExampleCreateSavepoint() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "savepoint-example-")
	defer os.RemoveAll(dir)

	// A job's storage with one completed checkpoint and its state.
	src := checkpoint.NewFileStorage(filepath.Join(dir, "job"))
	id := checkpoint.NewID(7)
	stateDir := filepath.Join(src.StateDir(id), "worker-0")
	_ = os.MkdirAll(stateDir, 0o755)
	_ = os.WriteFile(filepath.Join(stateDir, "000001.sst"), []byte("state"), 0o644)
	_ = src.Save(ctx, &checkpoint.CheckpointData{
		ID:        id,
		StateDirs: map[string]string{"worker-0": "worker-0"},
		Status:    checkpoint.StatusCompleted,
	})

	// Stop with a savepoint, then restore it into another job's storage.
	bs := memstore.New()
	if _, err := checkpoint.CreateSavepoint(ctx, src, bs, "before-upgrade"); err != nil {
		log.Fatal(err)
	}
	labels, _ := checkpoint.ListSavepoints(ctx, bs)
	dst := checkpoint.NewFileStorage(filepath.Join(dir, "new-job"))
	restored, err := checkpoint.RestoreSavepoint(ctx, dst, bs, "before-upgrade")
	if err != nil {
		log.Fatal(err)
	}
	state, _ := os.ReadFile(filepath.Join(dst.StateDir(restored), "worker-0", "000001.sst"))
	fmt.Println(labels, restored, string(state))
	// Output: [before-upgrade] ckpt-00000000000000000007 state
}
