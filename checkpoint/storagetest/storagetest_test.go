package storagetest_test

import (
	"context"
	"testing"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/memstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/checkpoint/storagetest"
	"github.com/tidemark-io/tidemark/filestore"
)

func TestFileStorage(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) checkpoint.Storage {
		return checkpoint.NewFileStorage(t.TempDir())
	})
}

func blobStorage(t *testing.T, bs blobstore.Blobstore) checkpoint.Storage {
	t.Helper()
	s := checkpoint.NewBlobStorage(bs, t.TempDir(), checkpoint.BlobOptions{})
	if _, err := s.Acquire(context.Background()); err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	return s
}

func TestBlobStorageOnMemstore(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) checkpoint.Storage { return blobStorage(t, memstore.New()) })
}

func TestBlobStorageOnFilestore(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) checkpoint.Storage {
		fs, err := filestore.New(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return blobStorage(t, fs)
	})
}

func TestBlobStorageUnderPrefix(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) checkpoint.Storage {
		bs, err := blobstore.WithPrefix(memstore.New(), "jobs/job-1")
		if err != nil {
			t.Fatal(err)
		}
		return blobStorage(t, bs)
	})
}
