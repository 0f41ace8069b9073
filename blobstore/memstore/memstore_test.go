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
