package integration

import (
	"testing"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
	"github.com/tidemark-io/tidemark/s3store"
)

// TestStoreConformanceOnVersitygw runs the Blobstore contract against the
// second S3 implementation, versitygw: the GetRange cases past MaxInt64
// (finding 8: versitygw, like MinIO, answered an overflowed Range with
// the whole object) and the key rules included.
func TestStoreConformanceOnVersitygw(t *testing.T) {
	srv := startVersitygw(t)
	blobstoretest.Run(t, func(t *testing.T) blobstore.Blobstore {
		return srv.store(t, "", func(o *s3store.Options) { o.PartSize = s3store.MinPartSize })
	}, blobstoretest.Options{LargeSize: 2*s3store.MinPartSize + 17, ListKeys: 1200})
}
