package integration

// The same tests on versitygw, a second S3 implementation (posix backend):
// the blobstore conformance suite through s3store, the checkpoint.Storage
// suite on a BlobStorage, the fencing tests, and a savepoint created on
// MinIO, copied to versitygw and restored from there. The bodies are the
// MinIO tests' own, parametrised by server; the conformance of the probe
// is in package s3store (probe_test.go).

import (
	"testing"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
	"github.com/tidemark-io/tidemark/integration/miniotest"
	"github.com/tidemark-io/tidemark/s3store"
)

func TestS3StoreOnVersityGWPassesConformanceSuite(t *testing.T) {
	srv := miniotest.SharedVersity(t)
	blobstoretest.Run(t, func(t *testing.T) blobstore.Blobstore {
		return openBucket(t, srv, srv.NewBucket(t))
	}, blobstoretest.Options{LargeSize: 2*s3store.MinPartSize + 2<<20 + 17}) // three parts, the last one short
}

func TestS3StoreProbePassesOnVersityGW(t *testing.T) {
	srv := miniotest.SharedVersity(t)
	s := openBucket(t, srv, srv.NewBucket(t))
	if err := s.Probe(t.Context()); err != nil {
		t.Fatalf("Probe on versitygw: %v", err)
	}
}

func TestBlobStorageOnVersityGWPassesStorageSuite(t *testing.T) {
	blobStoragePassesStorageSuite(t, miniotest.SharedVersity(t))
}

func TestFencedWriterCannotMovePointersOrDeleteOnVersityGW(t *testing.T) {
	fencedWriterCannotMovePointersOrDelete(t, miniotest.SharedVersity(t))
}

func TestZombieSaveInFlightDuringTakeoverIsFencedOnVersityGW(t *testing.T) {
	zombieSaveInFlightDuringTakeoverIsFenced(t, miniotest.SharedVersity(t))
}

func TestRandomWritersKeepFencingInvariantsOnVersityGW(t *testing.T) {
	randomWritersKeepFencingInvariants(t, miniotest.SharedVersity(t))
}

// TestSavepointFromMinIOCopiedToVersityGWRestoresByteExact: the savepoint
// is created in a MinIO bucket, copied by CopySavepoint (verifying it on
// the way) into a versitygw bucket, and restored from there.
func TestSavepointFromMinIOCopiedToVersityGWRestoresByteExact(t *testing.T) {
	savepointAcrossRegions(t, miniotest.Shared(t), miniotest.SharedVersity(t))
}
