package blobstorage

import (
	"crypto/sha256"
	"hash"
	"io"

	"github.com/tidemark-io/tidemark/blobstore"
)

// hashingReader counts and hashes the bytes of a state file as Save
// uploads it. It is a blobstore.DigestReader, so a store that signs the
// payload with its SHA-256 (s3store over plain HTTP) reuses this digest
// instead of hashing the file a second time: over HTTP that second hash
// was half of Save's SHA-256 time.
type hashingReader struct {
	r io.Reader
	h hash.Hash
	n int64
}

var _ blobstore.DigestReader = (*hashingReader)(nil)

func newHashingReader(r io.Reader) *hashingReader {
	return &hashingReader{r: r, h: sha256.New()}
}

func (c *hashingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.h.Write(p[:n])
	c.n += int64(n)
	return n, err
}

// SHA256 returns the SHA-256 of the bytes read so far.
func (c *hashingReader) SHA256() [sha256.Size]byte {
	var sum [sha256.Size]byte
	c.h.Sum(sum[:0])
	return sum
}
