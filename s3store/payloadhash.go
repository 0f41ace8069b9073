package s3store

import (
	"context"
	"encoding/hex"
	"io"
	"strings"

	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"

	"github.com/tidemark-io/tidemark/blobstore"
)

// To a plain-HTTP endpoint, the SDK signs the payload of every PUT: it
// computes the body's SHA-256 (besides its CRC32) before sending it. When
// the caller has hashed the body already as it was read
// (blobstore.DigestReader: Save does, for the checkpoint's record), the
// request is signed with that digest, and the SHA-256 of each uploaded
// state file is computed once instead of twice. The server checks the
// signed hash against the bytes it receives, so a wrong digest fails the
// write. Over HTTPS the SDK hashes nothing for the signature and the
// digest is not used.

// knownPayloadHash returns the hex SHA-256 of everything r yielded if r
// reports it and this Store signs payloads (a plain-HTTP endpoint), else
// "". The caller has read r to its end.
func (s *Store) knownPayloadHash(r io.Reader) string {
	dr, ok := r.(blobstore.DigestReader)
	if !ok || !s.signsPayload {
		return ""
	}
	sum := dr.SHA256()
	return hex.EncodeToString(sum[:])
}

// signsPayloads reports whether requests to endpoint carry a signed
// payload hash: the SDK signs payloads over plain HTTP only.
func signsPayloads(endpoint string) bool {
	return strings.HasPrefix(strings.ToLower(endpoint), "http://")
}

// withPayloadHash makes one operation sign its payload with hash instead
// of computing it. The hash is set per attempt, at the start of the
// Finalize step, before the checksum and signing middleware read it (a
// value put into the caller's context would not survive: the SDK clears
// stack values when an operation starts).
func withPayloadHash(hash string) func(*s3.Options) {
	return func(o *s3.Options) {
		o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
			return st.Finalize.Add(middleware.FinalizeMiddlewareFunc("TidemarkPayloadHash",
				func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
					return next.HandleFinalize(v4.SetPayloadHash(ctx, hash), in)
				}), middleware.Before)
		})
	}
}
