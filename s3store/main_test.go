package s3store

import (
	"context"
	"io"
	"os"
	"testing"

	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
	"github.com/tidemark-io/tidemark/integration/miniotest"
)

func TestMain(m *testing.M) { os.Exit(miniotest.Main(m)) }

// testPartSize is S3's minimum part size, so objects of a few parts (12-20
// MiB) exercise every multipart path.
const testPartSize = MinPartSize

// newStore returns a Store on a fresh bucket of srv with 5 MiB parts;
// edit adjusts the options first.
func newStore(t *testing.T, srv *miniotest.Server, edit func(*Options)) *Store {
	t.Helper()
	opts := Options{
		Bucket:      srv.NewBucket(t),
		Region:      srv.Region,
		Endpoint:    srv.Endpoint,
		PathStyle:   true,
		AccessKey:   srv.AccessKey,
		SecretKey:   srv.SecretKey,
		PartSize:    testPartSize,
		Concurrency: 3,
	}
	if edit != nil {
		edit(&opts)
	}
	s, err := New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// randomBytes returns n reproducible pseudo-random bytes: the conformance
// suite's payload, in the argument order this package's tests use.
func randomBytes(n int, seed uint64) []byte { return blobstoretest.Payload(seed, int64(n)) }

// stream returns b as a stream the store cannot seek or learn the length
// of, so that it must stream (see blobstoretest.Stream).
func stream(b []byte) io.Reader { return blobstoretest.Stream(b) }

// onlyReader hides every method of r but Read, like the readers stream
// returns, for the tests that wrap a reader of their own (a counting
// reader, say) rather than a byte slice.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

func readAll(t *testing.T, s *Store, key string) []byte {
	t.Helper()
	rc, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("get %q: %v", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read %q: %v", key, err)
	}
	return b
}

// assertNoUploads fails if any multipart upload is pending in the store
// for key (listed under the key itself as well as for the whole store: see
// the note on MinIO in uploads.go).
func assertNoUploads(t *testing.T, s *Store, key string) {
	t.Helper()
	keys, err := s.IncompleteUploads(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 0 {
		t.Errorf("incomplete multipart uploads left behind: %q", keys)
	}
}

func assertAbsent(t *testing.T, s *Store, key string) {
	t.Helper()
	ok, err := s.Exists(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if ok {
		t.Errorf("%q is visible after a failed put", key)
	}
}
