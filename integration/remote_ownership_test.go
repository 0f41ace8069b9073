package integration

// The object-store Storage with state in remote mode (issue 14) on real
// S3 servers: the ownership hand-off, failover onto an empty node (read at
// once), fencing of a zombie that keeps compacting, GC of remote objects
// (grace, retention, pins, the live writer's generation), verify naming a
// missing object, and self-contained savepoints carried to another bucket
// and to another server. The bodies are blobstorage/remotetest's, which
// also run on memstore.

import (
	"testing"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstorage/remotetest"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/checkpoint/storagetest"
	"github.com/tidemark-io/tidemark/integration/miniotest"
)

// remoteJobStore returns a job's prefix of a fresh bucket on srv.
func remoteJobStore(t *testing.T, srv *miniotest.Server) blobstore.Blobstore {
	t.Helper()
	bs, err := blobstore.WithPrefix(openBucket(t, srv, srv.NewBucket(t)), "jobs/wordcount")
	if err != nil {
		t.Fatal(err)
	}
	return bs
}

func TestRemoteOwnershipOnMinIO(t *testing.T) {
	srv := miniotest.Shared(t)
	remotetest.Run(t, func(t *testing.T) blobstore.Blobstore { return remoteJobStore(t, srv) })
}

// The checkpoint.Storage suite with the Storage in remote mode (a
// FakeRemote handing over one object per owner directory).
func TestBlobStorageInRemoteModeOnMinIOPassesStorageSuite(t *testing.T) {
	srv := miniotest.Shared(t)
	storagetest.Run(t, func(t *testing.T) checkpoint.Storage {
		bs := remoteJobStore(t, srv)
		return remotetest.ForSuite(t, acquiredWriter(t, bs, blobstorage.Options{}), bs)
	})
}

func TestRemoteSavepointFromMinIOToVersityGW(t *testing.T) {
	remotetest.SavepointToAnotherStore(t, remoteJobStore(t, miniotest.Shared(t)), remoteJobStore(t, miniotest.SharedVersity(t)))
}
