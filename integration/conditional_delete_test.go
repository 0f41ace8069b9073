package integration

// DeleteObject with If-Match (blobstore.ConditionalDeleter through
// s3store) on each S3 server here: GC deletes a checkpoint record only
// while it has the ETag GC read. A server that ignores the header is
// reported, not failed: GC then relies on its Stat just before the delete.

import (
	"errors"
	"strings"
	"testing"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/integration/miniotest"
)

func conditionalDelete(t *testing.T, srv *miniotest.Server) {
	ctx := t.Context()
	s := openBucket(t, srv, srv.NewBucket(t))
	etag, err := s.PutIfAbsent(ctx, "k", strings.NewReader("v1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutIfMatch(ctx, "k", etag, strings.NewReader("v2")); err != nil {
		t.Fatal(err)
	}
	switch err := s.DeleteIfMatch(ctx, "k", etag); {
	case errors.Is(err, blobstore.ErrPreconditionFailed):
		t.Logf("%s enforces If-Match on DeleteObject", srv.Endpoint)
	case err == nil:
		t.Logf("%s IGNORES If-Match on DeleteObject: it deleted an object whose ETag had changed (GC falls back to a Stat before deleting)", srv.Endpoint)
		return
	default:
		t.Fatalf("DeleteIfMatch with a stale ETag: %v", err)
	}
	info, err := s.Stat(ctx, "k")
	if err != nil {
		t.Fatalf("the object is gone after a refused conditional delete: %v", err)
	}
	if err := s.DeleteIfMatch(ctx, "k", info.ETag); err != nil {
		t.Fatalf("DeleteIfMatch with the current ETag: %v", err)
	}
	if ok, err := s.Exists(ctx, "k"); err != nil || ok {
		t.Fatalf("after DeleteIfMatch: exists %v, %v", ok, err)
	}
	if err := s.DeleteIfMatch(ctx, "k", info.ETag); err != nil && !errors.Is(err, blobstore.ErrNotFound) && !errors.Is(err, blobstore.ErrPreconditionFailed) {
		t.Fatalf("DeleteIfMatch of a missing key: %v", err)
	}
}

func TestS3StoreDeleteIfMatchOnMinIO(t *testing.T) { conditionalDelete(t, miniotest.Shared(t)) }

func TestS3StoreDeleteIfMatchOnVersityGW(t *testing.T) {
	conditionalDelete(t, miniotest.SharedVersity(t))
}
