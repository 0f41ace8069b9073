package blobstorage_test

import (
	"testing"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstorage/remotetest"
	"github.com/tidemark-io/tidemark/blobstore/memstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/checkpoint/storagetest"
)

func TestStorageSuiteInRemoteMode(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) checkpoint.Storage {
		bs := memstore.New()
		return remotetest.ForSuite(t, acquired(t, bs).(*blobstorage.Storage), bs)
	})
}
