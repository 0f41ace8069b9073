package blobstore

import (
	"context"
	"crypto/sha256"
	"errors"
	"io"
)

// ErrChecksum is returned (wrapped) by a read whose bytes do not match the
// checksum the store keeps for the object (s3store checks its CRC32C as it
// streams). It is damage, not a broken connection: reading the object again
// from where the read stopped cannot repair what was already handed over.
var ErrChecksum = errors.New("blobstore: checksum mismatch")

// WithContentVerified returns ctx marked so that the objects read in it
// are verified by the caller, against digests it holds (Restore checks
// every file's SHA-256 against its record): a store may skip a transport
// checksum of its own for them, such as the CRC32 the AWS SDK computes
// over every whole-object GET, which would check the same bytes again,
// less strongly. A read in it returns the same bytes or errors; a store
// without such a checksum ignores the mark.
func WithContentVerified(ctx context.Context) context.Context {
	return context.WithValue(ctx, contentVerifiedKey{}, true)
}

// ContentVerified reports whether ctx was marked by WithContentVerified.
func ContentVerified(ctx context.Context) bool {
	v, _ := ctx.Value(contentVerifiedKey{}).(bool)
	return v
}

type contentVerifiedKey struct{}

// DigestReader is a reader that hashes what it yields, as Save's readers
// of state files do (the digest goes into the checkpoint's record).
// SHA256 returns the SHA-256 of every byte Read has returned so far. A
// store that needs the digest of a body it has read to its end (s3store
// signs the payload of a PUT to a plain-HTTP endpoint with it) takes it
// from there instead of hashing the same bytes a second time. A wrong
// digest makes the write fail, not succeed with other content: the
// server checks the signed payload hash against the bytes it receives.
type DigestReader interface {
	io.Reader
	SHA256() [sha256.Size]byte
}
