// Package s3store implements blobstore.Blobstore on Amazon S3 and
// S3-compatible stores (MinIO, versitygw) with aws-sdk-go-v2.
//
// # Opening a store
//
// [New] takes [Options]; credentials and region come from the standard AWS
// chain (config.LoadDefaultConfig: environment, shared config and
// credentials files, SSO, web identity, container and instance roles)
// unless Options carries static keys. Importing the package registers the
// "s3" URL scheme with blobstore.Open:
//
//	s3://bucket/prefix?region=eu-west-1
//	s3://bucket/prefix?endpoint=http://127.0.0.1:9000&path_style=true&checksum=when_required
//
// Query parameters: region, endpoint, path_style (bool), part_size (bytes,
// or with a KiB/MiB/GiB suffix), concurrency, sse (AES256 or aws:kms),
// sse_kms_key_id, checksum (when_supported or when_required), max_attempts.
// Unknown parameters are an error, so a typo is not silently ignored.
// Credentials never go in the URL: a URL with user information is refused.
//
// # Uploads
//
// Put, PutIfAbsent and PutIfMatch stream a reader of unknown length. A
// reader that ends within the first part is sent with one PutObject;
// anything larger becomes a multipart upload whose parts are uploaded by
// Options.Concurrency workers from a per-upload budget of Concurrency+1
// part buffers, so one upload holds at most PartSize × (Concurrency+1)
// bytes whatever the size of the reader.
// On any error or context cancellation the multipart upload is aborted
// (with a fresh context, since the caller's may be cancelled), so nothing
// becomes visible; if even the abort fails (the server is down),
// [Store.AbortIncompleteUploads] removes the leftover in a later sweep.
//
// # Parallel downloads and cleanup
//
// [Store.GetParallel] reads a large object as Concurrency ranged GETs
// ahead of the reader and yields the bytes in order, so a restore can
// write a file and hash it in the same pass (it holds at most Concurrency
// part buffers); [Store.Download] copies the ranges to an io.WriterAt
// through small buffers and holds no part buffers. Both pin the ETag seen at the start with
// If-Match, so an object replaced mid-download fails rather than mixing
// versions. [Store.AbortIncompleteUploads] and [Store.IncompleteUploads]
// find multipart uploads that failed puts left behind (see the note on
// MinIO's listing in their documentation).
//
// # Conditional writes
//
// PutIfAbsent sends If-None-Match: * and PutIfMatch sends If-Match on
// PutObject and on CompleteMultipartUpload: S3 checks conditions only when
// the object becomes visible, so CreateMultipartUpload and UploadPart take
// none, and a failed Complete is followed by an abort. 412 Precondition
// Failed (and 304, which MinIO once returned instead) is
// blobstore.ErrPreconditionFailed.
//
// A retried conditional write must not fail against its own earlier
// success (the first attempt landed, its response was lost, the retry
// sees the object it wrote itself and gets 412). Every conditional write
// therefore carries a random write id in its metadata
// (x-amz-meta-tidemark-write-id); on 412 the store reads the object's
// metadata and reports success if the id is its own.
//
// Some S3-compatible servers ignore conditional headers altogether.
// [Store.Probe] checks an endpoint before anything relies on them.
//
// # Retries and checksums
//
// Requests are retried by the SDK's standard retryer (exponential backoff
// with jitter) with the client-side retry token bucket disabled: under
// sustained throttling the default bucket drains and the client then stops
// retrying altogether (FLINK-40387; Litestream disables it too). 409
// ConditionalRequestConflict, which S3 returns when two conditional writes
// to one key overlap, is retried as well.
//
// Since service/s3 v1.73 the SDK sends CRC32 request checksums and
// validates response checksums by default. Some S3-compatible stores
// reject those requests; Options.ChecksumWhenRequired (URL
// checksum=when_required) limits both to the operations that require
// them.
//
// # Errors
//
// Errors wrap the blobstore sentinels (ErrNotFound, ErrPreconditionFailed,
// ErrInvalidKey) and, for configuration problems, [ErrBucketNotFound],
// [ErrAccessDenied] and [ErrUnreachable], which name the bucket and
// endpoint (never a secret). [ErrConditionsIgnored] is what Probe returns
// for an endpoint that does not enforce conditional writes.
//
// A HEAD request has no error body, so Stat and Exists cannot tell a
// missing bucket from a missing key: both are blobstore.ErrNotFound there.
package s3store
