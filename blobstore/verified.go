package blobstore

import "context"

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
