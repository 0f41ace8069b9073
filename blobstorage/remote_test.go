package blobstorage_test

import (
	"testing"

	"github.com/tidemark-io/tidemark/blobstorage/remotetest"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/memstore"
)

func TestRemoteModeOnMemstore(t *testing.T) {
	remotetest.Run(t, func(t *testing.T) blobstore.Blobstore {
		bs, err := blobstore.WithPrefix(memstore.New(), "jobs/job-1")
		if err != nil {
			t.Fatal(err)
		}
		return bs
	})
}
