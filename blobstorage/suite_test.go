package blobstorage_test

import (
	"testing"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/memstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/checkpoint/storagetest"
	"github.com/tidemark-io/tidemark/filestore"
)

func acquired(t *testing.T, bs blobstore.Blobstore) checkpoint.Storage {
	t.Helper()
	s := blobstorage.New(bs, t.TempDir(), blobstorage.Options{})
	if _, err := s.Acquire(t.Context()); err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	return s
}

func TestStorageSuiteOnMemstore(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) checkpoint.Storage { return acquired(t, memstore.New()) })
}

func TestStorageSuiteOnFilestore(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) checkpoint.Storage {
		fs, err := filestore.New(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return acquired(t, fs)
	})
}

func TestStorageSuiteUnderPrefix(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) checkpoint.Storage {
		bs, err := blobstore.WithPrefix(memstore.New(), "jobs/job-1")
		if err != nil {
			t.Fatal(err)
		}
		return acquired(t, bs)
	})
}
