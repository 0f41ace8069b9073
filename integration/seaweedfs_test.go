package integration

// The same tests on SeaweedFS, a third S3 implementation (its S3 gateway
// in front of a master, a volume server and a filer): the blobstore
// conformance suite through s3store, the probe, the checkpoint.Storage
// suite on a BlobStorage, the fencing tests, the remote-mode ownership
// suite, and a savepoint created on MinIO, copied to SeaweedFS and
// restored from there. The bodies are the
// MinIO tests' own, parametrised by server; docs/servers.md says what
// each server enforces.

import (
	"testing"

	"github.com/tidemark-io/tidemark/blobstorage/remotetest"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
	"github.com/tidemark-io/tidemark/integration/miniotest"
	"github.com/tidemark-io/tidemark/s3store"
)

func TestS3StoreOnSeaweedFSPassesConformanceSuite(t *testing.T) {
	srv := miniotest.SharedSeaweedFS(t)
	blobstoretest.Run(t, func(t *testing.T) blobstore.Blobstore {
		return openBucket(t, srv, srv.NewBucket(t))
	}, blobstoretest.Options{LargeSize: 2*s3store.MinPartSize + 2<<20 + 17}) // three parts, the last one short
}

func TestS3StoreProbePassesOnSeaweedFS(t *testing.T) {
	srv := miniotest.SharedSeaweedFS(t)
	s := openBucket(t, srv, srv.NewBucket(t))
	if err := s.Probe(t.Context()); err != nil {
		t.Fatalf("Probe on SeaweedFS: %v", err)
	}
}

func TestBlobStorageOnSeaweedFSPassesStorageSuite(t *testing.T) {
	blobStoragePassesStorageSuite(t, miniotest.SharedSeaweedFS(t))
}

func TestFencedWriterCannotMovePointersOrDeleteOnSeaweedFS(t *testing.T) {
	fencedWriterCannotMovePointersOrDelete(t, miniotest.SharedSeaweedFS(t))
}

func TestZombieSaveInFlightDuringTakeoverIsFencedOnSeaweedFS(t *testing.T) {
	zombieSaveInFlightDuringTakeoverIsFenced(t, miniotest.SharedSeaweedFS(t))
}

func TestRandomWritersKeepFencingInvariantsOnSeaweedFS(t *testing.T) {
	randomWritersKeepFencingInvariants(t, miniotest.SharedSeaweedFS(t))
}

// TestSavepointFromMinIOCopiedToSeaweedFSRestoresByteExact: the savepoint
// is created in a MinIO bucket, copied by CopySavepoint (verifying it on
// the way) into a SeaweedFS bucket, and restored from there.
func TestSavepointFromMinIOCopiedToSeaweedFSRestoresByteExact(t *testing.T) {
	savepointAcrossRegions(t, miniotest.Shared(t), miniotest.SharedSeaweedFS(t))
}

// TestRemoteOwnershipOnSeaweedFS: the state-in-remote-mode suite
// (ownership hand-off, failover, fencing of a compacting zombie, GC of
// remote objects) on SeaweedFS, as on MinIO.
func TestRemoteOwnershipOnSeaweedFS(t *testing.T) {
	srv := miniotest.SharedSeaweedFS(t)
	remotetest.Run(t, func(t *testing.T) blobstore.Blobstore { return remoteJobStore(t, srv) })
}
