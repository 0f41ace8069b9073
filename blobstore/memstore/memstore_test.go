package memstore_test

import (
	"testing"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
	"github.com/tidemark-io/tidemark/blobstore/memstore"
)

func TestConformance(t *testing.T) {
	blobstoretest.Run(t, func(*testing.T) blobstore.Blobstore { return memstore.New() }, blobstoretest.Options{})
}

func TestConformanceWithPrefix(t *testing.T) {
	blobstoretest.Run(t, func(t *testing.T) blobstore.Blobstore {
		bs, err := blobstore.WithPrefix(memstore.New(), "jobs/one")
		if err != nil {
			t.Fatal(err)
		}
		return bs
	}, blobstoretest.Options{MaxKeyLen: blobstore.MaxKeyLen - len("jobs/one/")})
}
