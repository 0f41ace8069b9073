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
// sse_kms_key_id, checksum (when_supported or when_required),
// unsigned_payload (bool), max_attempts
// (-1: until the operation timeout), and the durations (Go syntax: 500ms,
// 30s, 2m; "none" for no limit) max_backoff, attempt_timeout,
// idle_timeout and operation_timeout (see Options for each, and below).
// Unknown parameters are an error, so a typo is not silently ignored, and
// so is every value New or the first request would refuse: endpoint must
// be an http or https URL with a host, part_size within 5MiB–5GiB,
// concurrency and max_attempts positive (max_attempts -1 needs an
// operation timeout), durations positive. Such an error wraps
// blobstore.ErrInvalidURL, names the parameter and the values it takes,
// and comes from blobstore.Open, before any request.
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
// # Upload records and reserved names
//
// Every multipart upload a Store starts is recorded in a small object at
// <prefix>/.tidemark-uploads/<hash>, written before CreateMultipartUpload
// (so that even an upload whose Create answer was lost is found, under
// its key) and again with the upload id before any part is sent; it
// holds the key, the upload id and the start time and is deleted once
// the upload is completed or aborted. A record that outlives its upload (the process died, or the
// server was down when the upload failed) lets
// [Store.AbortIncompleteUploads] of any later Store on the same bucket
// and prefix abort the upload by key and id, without relying on
// ListMultipartUploads (which MinIO, after a restart, answers only for
// an upload's exact key). The records live inside the prefix, so a
// policy granting a job its prefix covers them; ".tidemark-uploads" is a
// segment no key may have on any store (blobstore.ReservedUploadsSegment)
// and List never yields a record. A record costs two small PUTs and one
// DELETE per multipart upload (objects over PartSize); single-part writes
// have none. The probe uses keys under
// _tidemark_probe/ and deletes them.
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
// Some S3-compatible servers ignore conditional headers altogether, or
// enforce them one writer at a time but let racing writers all win.
// [Store.Probe] checks an endpoint before anything relies on them;
// [Store.ProbeReport] also says what else it supports (docs/servers.md).
//
// # Deadlines
//
// No request waits without bound. Per attempt, connecting and waiting for
// the response headers (once the request and its body are sent) are
// bounded by Options.AttemptTimeout (default 10 s), and a body that moves
// no byte in either direction by Options.IdleTimeout (default 30 s); a
// slow transfer that keeps moving is never cut. One request with all its
// attempts and backoff is bounded by Options.OperationTimeout (default 1
// min, plus one second per MiB of request body, so a part upload has time
// to be sent). A request that runs out of time fails with an error that
// wraps [ErrTimeout] and says which bound it hit; if the endpoint refused
// every connection meanwhile it wraps [ErrUnreachable] too. The caller's
// own context deadline is context.DeadlineExceeded.
//
// # Retries and checksums
//
// Requests are retried by the SDK's standard retryer (exponential backoff
// from 50 ms, from 1 s after throttling such as 503 SlowDown, with full
// jitter, up to Options.MaxBackoff, default 5 s) for Options.MaxAttempts
// attempts (default 10: about 8 s of failures on average, 16 s at most).
// MaxAttempts -1 retries until the operation timeout: MaxAttempts -1 and
// OperationTimeout 45 s ride through 30 s of a dead endpoint. The
// client-side retry token bucket is disabled: under sustained throttling
// the default bucket drains and the client then stops retrying altogether
// (FLINK-40387; Litestream disables it too). 409
// ConditionalRequestConflict, which S3 returns when two conditional writes
// to one key overlap, is retried as well.
//
// Every upload carries a CRC32C of the whole object that the server
// verifies before the object becomes visible: PutObject sends it, and a
// multipart upload is of checksum type FULL_OBJECT, with each part's
// CRC32C on UploadPart and the whole object's, folded from the parts'
// (no byte is hashed twice), on Complete. A whole-object Get is checked
// against it as it streams, and so are GetParallel and Download, whose
// ranged GETs carry none: the ranges' CRC32Cs are folded in order. A
// mismatch wraps blobstore.ErrChecksum. A read in a context marked by
// blobstore.WithContentVerified (the caller checks a digest of its own:
// Restore's SHA-256) checks no checksum. docs/integrity.md has the
// servers verified and the CPU cost.
//
// Some S3-compatible stores reject checksums; Options.ChecksumWhenRequired
// (URL checksum=when_required) sends and checks them only for the
// operations that require them. To a plain-HTTP endpoint the SDK also
// signs the SHA-256 of every request body; a single-part Put of a
// blobstore.DigestReader (Save's state files) is signed with the digest
// the reader computed instead of hashing the body again (payloadhash.go),
// and Options.UnsignedPayload (URL unsigned_payload=true) signs no body
// digest at all.
//
// # Errors
//
// Errors wrap the blobstore sentinels (ErrNotFound, ErrPreconditionFailed,
// ErrInvalidKey, also when the server refuses a name the key rules let
// through) and, for configuration problems, [ErrBucketNotFound],
// [ErrAccessDenied], [ErrNoCredentials] (which says how to provide them),
// [ErrUnreachable] and [ErrTimeout], which name the bucket and endpoint
// (never a secret). [ErrConditionsIgnored] is what Probe returns for an
// endpoint that does not enforce conditional writes.
//
// # Logging
//
// The package logs nothing itself. The AWS SDK's own log lines go to
// Options.Logger (a *slog.Logger), and nowhere if it is nil: by default
// the SDK would print "SDK <date> WARN ..." lines to stderr.
//
// A HEAD request has no error body, so Stat and Exists cannot tell a
// missing bucket from a missing key: both are blobstore.ErrNotFound there.
package s3store
