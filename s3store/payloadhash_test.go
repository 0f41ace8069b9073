package s3store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"testing"

	"github.com/tidemark-io/tidemark/integration/miniotest"
)

// digestReader yields data and reports sum as the SHA-256 of what it
// yielded, right or wrong.
type digestReader struct {
	r   io.Reader
	sum [sha256.Size]byte
}

func (d *digestReader) Read(p []byte) (int, error) { return d.r.Read(p) }
func (d *digestReader) SHA256() [sha256.Size]byte  { return d.sum }

// TestPutSignsWithTheDigestTheReaderReports checks that a single-part
// PUT to a plain-HTTP endpoint is signed with the SHA-256 its
// blobstore.DigestReader reports instead of one the SDK computes: with
// the right digest the object is stored byte for byte; with a wrong one
// the server refuses the write (so the digest was used, and a wrong one
// cannot store other content). A body of several parts is signed part by
// part by the SDK and is stored whatever the reader reports.
func TestPutSignsWithTheDigestTheReaderReports(t *testing.T) {
	srv := miniotest.Shared(t)
	s := newStore(t, srv, nil)
	if !s.signsPayload {
		t.Fatalf("endpoint %s: the store does not sign payloads; the test needs plain HTTP", srv.Endpoint)
	}
	ctx := context.Background()
	small := randomBytes(100<<10, 5)
	if err := s.Put(ctx, "right", &digestReader{r: bytes.NewReader(small), sum: sha256.Sum256(small)}); err != nil {
		t.Fatalf("Put with the right digest: %v", err)
	}
	if got := readAll(t, s, "right"); !bytes.Equal(got, small) {
		t.Fatalf("stored %d bytes, want the %d put", len(got), len(small))
	}
	wrong := sha256.Sum256([]byte("something else"))
	if err := s.Put(ctx, "wrong", &digestReader{r: bytes.NewReader(small), sum: wrong}); err == nil {
		t.Fatal("Put signed with a wrong digest succeeded: the reported digest was not used")
	}
	assertAbsent(t, s, "wrong")
	big := randomBytes(2*testPartSize+7, 6)
	if err := s.Put(ctx, "big", &digestReader{r: bytes.NewReader(big), sum: wrong}); err != nil {
		t.Fatalf("multipart Put with a reported digest (unused): %v", err)
	}
	if got := readAll(t, s, "big"); !bytes.Equal(got, big) {
		t.Fatalf("stored %d bytes, want the %d put", len(got), len(big))
	}
}
