package state_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/tidemark-io/tidemark/state"
)

// A checkpoint taken on one node is opened on another: the checkpoint
// directory is what the object-store layer uploads and downloads.
func Example() {
	ctx := context.Background()
	root, err := os.MkdirTemp("", "state-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(root)

	s, err := state.Open(filepath.Join(root, "live"), state.Options{})
	if err != nil {
		log.Fatal(err)
	}
	counts, err := s.Owner("count-0")
	if err != nil {
		log.Fatal(err)
	}
	if err := counts.Set([]byte("user/42"), []byte("7")); err != nil {
		log.Fatal(err)
	}
	stateDirs, err := s.Checkpoint(ctx, filepath.Join(root, "ckpt-1"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("state dirs:", stateDirs)
	if err := s.Close(); err != nil {
		log.Fatal(err)
	}

	files, err := state.ListFiles(filepath.Join(root, "ckpt-1"))
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range files {
		if f.Kind == state.Immutable {
			fmt.Println("shareable:", filepath.Ext(f.RelPath))
		}
	}

	r, err := state.OpenCheckpoint(ctx, filepath.Join(root, "ckpt-1"), filepath.Join(root, "restored"), state.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	restored, err := r.Owner("count-0")
	if err != nil {
		log.Fatal(err)
	}
	v, ok, err := restored.Get([]byte("user/42"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("restored:", string(v), ok)
	// Output:
	// state dirs: map[count-0:count-0]
	// shareable: .sst
	// restored: 7 true
}
