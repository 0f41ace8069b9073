package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/s3store"
)

// childOp is one Tidemark operation, handed to a re-executed peerbench as
// JSON in $PEERBENCH_CHILD.
type childOp struct {
	Op       string `json:"op"` // put, get, get-parallel, save, restore, copy
	Endpoint string `json:"endpoint"`
	Bucket   string `json:"bucket"`
	Prefix   string `json:"prefix,omitempty"` // of the store (save, restore, copy's destination)
	Key      string `json:"key,omitempty"`    // put, get
	Dir      string `json:"dir,omitempty"`    // save: the BlobStorage's local dir; restore: an empty one
	ID       string `json:"id,omitempty"`     // save, restore: the checkpoint
	Label    string `json:"label,omitempty"`  // copy: the savepoint
	DstEnd   string `json:"dst_endpoint,omitempty"`
	Conc     int    `json:"concurrency,omitempty"` // BlobStorage's
}

// childMain performs the operation in $PEERBENCH_CHILD: put reads stdin,
// get writes stdout. It returns the exit code.
func childMain() int {
	var op childOp
	if err := json.Unmarshal([]byte(os.Getenv(childEnv)), &op); err != nil {
		fmt.Fprintf(os.Stderr, "peerbench child: %s: %v\n", childEnv, err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	if err := op.run(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "peerbench child %s: %v\n", op.Op, err)
		return 1
	}
	return 0
}

func openStore(ctx context.Context, endpoint, bucket, prefix string) (*s3store.Store, error) {
	return s3store.New(ctx, s3store.Options{
		Bucket: bucket, Prefix: prefix, Endpoint: endpoint, Region: region, PathStyle: true,
		AccessKey: accessKey, SecretKey: secretKey,
	})
}

func (op childOp) run(ctx context.Context) error {
	store, err := openStore(ctx, op.Endpoint, op.Bucket, op.Prefix)
	if err != nil {
		return err
	}
	switch op.Op {
	case "put":
		// os.Stdin is a pipe: the store cannot seek it or learn its size.
		return store.Put(ctx, op.Key, os.Stdin)
	case "get", "get-parallel":
		// Get is one GET, read through blobstore.WithResumingReads as
		// Tidemark's own read paths (restore, verify, savepoints) read;
		// GetParallel streams one object in order from parallel ranged
		// GETs. Either is copied as a caller would, with io.Copy.
		open := blobstore.WithResumingReads(store, blobstore.DefaultReadResumptions).Get
		if op.Op == "get-parallel" {
			open = store.GetParallel
		}
		rc, err := open(ctx, op.Key)
		if err != nil {
			return err
		}
		defer rc.Close()
		if _, err = io.Copy(os.Stdout, rc); err != nil {
			return err
		}
		return rc.Close()
	case "save":
		s := blobstorage.New(store, op.Dir, blobstorage.Options{Concurrency: op.Conc})
		if _, err := s.Acquire(ctx); err != nil {
			return err
		}
		return s.Save(ctx, record(op.ID))
	case "restore":
		return blobstorage.New(store, op.Dir, blobstorage.Options{Concurrency: op.Conc}).Restore(ctx, op.ID)
	case "copy":
		src, err := openStore(ctx, op.Endpoint, op.Bucket, savepointPrefix)
		if err != nil {
			return err
		}
		dst, err := openStore(ctx, op.DstEnd, op.Bucket, op.Prefix)
		if err != nil {
			return err
		}
		return checkpoint.CopySavepoint(ctx, src, dst, op.Label)
	}
	return fmt.Errorf("unknown operation %q", op.Op)
}

// record is the checkpoint the benchmark saves: one owner, "op-0", whose
// state directory holds the benchmark's files.
func record(id string) *checkpoint.CheckpointData {
	return &checkpoint.CheckpointData{
		ID: id, Timestamp: time.Now().UTC(), Status: checkpoint.StatusCompleted,
		Operators: map[string][]byte{"0": []byte("peerbench")},
		StateDirs: map[string]string{"op-0": "op-0"},
	}
}
