package s3store

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"os"
	"testing"

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

// randomBytes returns n reproducible pseudo-random bytes.
func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// onlyReader hides every method but Read, so nothing can seek or learn the
// length: the store must stream.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

func stream(b []byte) io.Reader { return onlyReader{bytes.NewReader(b)} }

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
