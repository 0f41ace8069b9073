// Package s3store implements blobstore.Blobstore on Amazon S3 and
// S3-compatible stores (MinIO, versitygw) with aws-sdk-go-v2.
//
// # Opening a store
//
// [New] takes [Options]; credentials and region come from the standard AWS
// chain unless Options carries static keys. Importing the package
// registers the "s3" URL scheme with blobstore.Open:
//
//	s3://bucket/prefix?region=eu-west-1
//	s3://bucket/prefix?endpoint=http://127.0.0.1:9000&path_style=true&checksum=when_required
//
// An unknown parameter, or a value New would refuse, is an error that
// wraps blobstore.ErrInvalidURL, before any request. Credentials never go
// in the URL. The parameters are listed in docs/s3.md.
//
// # Writes and reads
//
// Put streams a reader of unknown length: one PutObject within the first
// part, else a multipart upload holding at most PartSize × (Concurrency+1)
// bytes, aborted on any error. Each multipart upload is recorded under
// .tidemark-uploads/ until it ends, so [Store.AbortIncompleteUploads]
// finds what a dead process left. [Store.GetParallel] and [Store.Download]
// read a large object as ranged GETs pinned to one ETag.
//
// PutIfAbsent and PutIfMatch send If-None-Match and If-Match on PutObject
// and CompleteMultipartUpload; a 412 is blobstore.ErrPreconditionFailed.
// A write id in the metadata lets a retry recognise its own earlier
// success. [Store.Probe] checks that an endpoint enforces the conditions.
//
// # Deadlines, retries, checksums
//
// No request waits without bound: Options.AttemptTimeout,
// Options.IdleTimeout and Options.OperationTimeout bound an attempt, a
// stalled body and a request with its retries ([ErrTimeout]). The SDK's
// retryer runs Options.MaxAttempts attempts, without its client-side
// token bucket. Every upload carries a CRC32C of the whole object, and
// reads check it (blobstore.ErrChecksum) unless the caller checks a digest
// of its own (blobstore.WithContentVerified).
//
// The details — upload records, conditional writes, each deadline, the
// retry policy, checksums and logging — are in docs/s3.md ("The s3store
// package"); what each server enforces is in docs/servers.md.
//
// # Errors
//
// Errors wrap the blobstore sentinels (ErrNotFound, ErrPreconditionFailed,
// ErrInvalidKey, also when the server refuses a name the key rules let
// through) and, for configuration problems, [ErrBucketNotFound],
// [ErrAccessDenied], [ErrNoCredentials] (which says how to provide them),
// [ErrUnreachable] and [ErrTimeout], which name the bucket and endpoint
// (never a secret). [ErrConditionsIgnored] is what Probe returns for an
// endpoint that does not enforce conditional writes. The package logs
// nothing itself; the SDK's log lines go to Options.Logger.
package s3store
