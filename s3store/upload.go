package s3store

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/tidemark-io/tidemark/blobstore"
)

// The uploader is written here rather than taken from
// feature/s3/manager or feature/s3/transfermanager:
//
//   - manager.Uploader (v1.23) puts no condition on
//     CompleteMultipartUpload, where S3 checks it, so it cannot do
//     PutIfAbsent or PutIfMatch of a large object.
//   - transfermanager v0.5.7 does pass IfMatch/IfNoneMatch to Complete and
//     aborts after a failed Complete, but: it reads the first part with
//     io.ReadAll into a fresh, growing slice on every upload (not pooled);
//     it notices a cancelled context only when a request fails, so a
//     reader that keeps producing after cancel is read on; it aborts with
//     the caller's (possibly cancelled) context unless FailTimeout is set;
//     it calls log.Printf from library code; and it is a v0 API. We also
//     need the 412 answer unwrapped to resolve it against our write id.
//
// What is here is the same pipeline in about a hundred lines: one
// goroutine reads parts into buffers and hands them to Concurrency workers
// over an unbuffered channel. The buffers come from a partBudget of
// Concurrency+1 slots (buffers.go), so an upload holds at most
// Concurrency+1 of them whatever the scheduling, and reuses them: a
// buffer goes back once its part is uploaded.

// abortTimeout bounds the cleanup requests made after a failure, with a
// fresh context since the caller's may be the reason for the failure.
const abortTimeout = 30 * time.Second

// writeIDMeta is the metadata key (x-amz-meta-tidemark-write-id) that tags
// every conditional write with a random id, so that a write which gets
// 412 can tell its own earlier success from someone else's object.
const writeIDMeta = "tidemark-write-id"

// condition is the precondition of a write.
type condition struct {
	ifNoneMatch bool   // PutIfAbsent
	ifMatch     string // PutIfMatch: quoted ETag
	writeID     string // set for conditional writes and multipart uploads
}

func (c condition) conditional() bool { return c.ifNoneMatch || c.ifMatch != "" }

// Put stores r under key, overwriting any object there.
func (s *Store) Put(ctx context.Context, key string, r io.Reader) error {
	_, err := s.put(ctx, "put", key, r, condition{})
	return err
}

// PutIfAbsent stores r under key only if no object is there, and returns
// the new ETag; otherwise it fails with blobstore.ErrPreconditionFailed.
func (s *Store) PutIfAbsent(ctx context.Context, key string, r io.Reader) (string, error) {
	return s.put(ctx, "put-if-absent", key, r, condition{ifNoneMatch: true, writeID: newWriteID()})
}

// PutIfMatch replaces the object at key only if its ETag is etag, and
// returns the new ETag; otherwise (also when the key is missing) it fails
// with blobstore.ErrPreconditionFailed.
func (s *Store) PutIfMatch(ctx context.Context, key, etag string, r io.Reader) (string, error) {
	if strings.Trim(etag, `"`) == "" {
		if _, err := s.objectKey(key); err != nil {
			return "", err
		}
		return "", fmt.Errorf("s3store: put-if-match %q: empty etag: %w", key, blobstore.ErrPreconditionFailed)
	}
	return s.put(ctx, "put-if-match", key, r, condition{ifMatch: quote(etag), writeID: newWriteID()})
}

func newWriteID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	return hex.EncodeToString(b[:])
}

func (s *Store) metadata(c condition) map[string]string {
	if c.writeID == "" {
		return nil
	}
	return map[string]string{writeIDMeta: c.writeID}
}

// readFull fills buf from r like io.ReadFull but checks ctx between reads,
// so a cancelled upload stops reading even if r keeps producing. It
// returns io.EOF (not io.ErrUnexpectedEOF) whenever r ended. If crc is
// not nil, it is set to the CRC32C of what was read, computed chunk by
// chunk while each is in cache.
func readFull(ctx context.Context, r io.Reader, buf []byte, crc *uint32) (int, error) {
	n := 0
	if crc != nil {
		*crc = 0
	}
	for n < len(buf) {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		m, err := r.Read(buf[n:])
		if crc != nil && m > 0 {
			*crc = crc32.Update(*crc, castagnoli, buf[n:n+m])
		}
		n += m
		if err == io.EOF {
			return n, io.EOF
		}
		if err != nil {
			return n, fmt.Errorf("read: %w", err)
		}
	}
	return n, ctx.Err()
}

// put is the body of Put, PutIfAbsent and PutIfMatch; it returns the new
// ETag.
func (s *Store) put(ctx context.Context, op, key string, r io.Reader, c condition) (string, error) {
	okey, err := s.objectKey(key)
	if err != nil {
		return "", err
	}
	bufs := newPartBudget(s.bufs, s.conc+1)
	buf, err := bufs.get(ctx)
	if err != nil {
		return "", fmt.Errorf("s3store: %s %q: %w", op, key, err)
	}
	var crc uint32
	n, err := readFull(ctx, r, *buf, s.crcOf(&crc))
	if err != nil && err != io.EOF {
		bufs.put(buf)
		return "", fmt.Errorf("s3store: %s %q: %w", op, key, err)
	}
	if err == io.EOF {
		etag, err := s.putSingle(ctx, okey, (*buf)[:n], crc, c, s.knownPayloadHash(r))
		// The buffer is reused only after a success: after a failed
		// request the HTTP transport may still be reading the body in
		// another goroutine.
		if err == nil {
			bufs.put(buf)
		} else {
			bufs.drop(buf)
		}
		return s.resolve(ctx, op, key, okey, etag, err, c)
	}
	if c.writeID == "" {
		// Tag unconditional multipart uploads too, so that a retried
		// Complete that meets NoSuchUpload can tell whether its first
		// attempt completed the upload.
		c.writeID = newWriteID()
	}
	etag, err := s.putMultipart(ctx, okey, bufs, part{num: 1, buf: buf, n: n, crc: crc}, r, c)
	return s.resolve(ctx, op, key, okey, etag, err, c)
}

// crcOf returns crc if uploads carry checksums (checksum.go), else nil.
func (s *Store) crcOf(crc *uint32) *uint32 {
	if !s.checksums {
		return nil
	}
	return crc
}

// putSingle writes data in one PutObject, with crc, its CRC32C, for the
// server to verify (unless checksums are off). payloadHash, if not "", is
// the hex SHA-256 of data, which the request is signed with instead of
// the SDK hashing data itself (see knownPayloadHash).
func (s *Store) putSingle(ctx context.Context, okey string, data []byte, crc uint32, c condition, payloadHash string) (string, error) {
	in := &s3.PutObjectInput{
		Bucket:        &s.bucket,
		Key:           &okey,
		Body:          bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
		Metadata:      s.metadata(c),
	}
	s.setSSE(&in.ServerSideEncryption, &in.SSEKMSKeyId)
	if s.checksums {
		// Given the value, the SDK computes no checksum of its own.
		in.ChecksumAlgorithm = types.ChecksumAlgorithmCrc32c
		in.ChecksumCRC32C = crc32cBase64(crc)
	}
	if c.ifNoneMatch {
		in.IfNoneMatch = aws.String("*")
	}
	if c.ifMatch != "" {
		in.IfMatch = aws.String(c.ifMatch)
	}
	var optFns []func(*s3.Options)
	if payloadHash != "" {
		optFns = append(optFns, withPayloadHash(payloadHash))
	}
	out, err := s.client.PutObject(ctx, in, optFns...)
	if err != nil {
		return "", err
	}
	return unquote(out.ETag), nil
}

func (s *Store) setSSE(sse *types.ServerSideEncryption, kms **string) {
	*sse = s.sse
	if s.kmsKey != "" {
		*kms = aws.String(s.kmsKey)
	}
}

// resolve maps the outcome of a write. A failed condition on a
// conditional write is checked against the stored object's write id: if
// it is ours, an earlier attempt of this very write succeeded (its
// response was lost and the SDK retried), and the write succeeded. If the
// stored object cannot be read, the outcome is unknown, and the error
// says so rather than claiming a failed condition: only what was checked
// is reported as ErrPreconditionFailed.
func (s *Store) resolve(ctx context.Context, op, key, okey, etag string, err error, c condition) (string, error) {
	if err == nil {
		return etag, nil
	}
	code, status := errCodes(err)
	// lost: a request that got no HTTP answer at all (the connection failed
	// after the request may have been applied, on the last attempt): the
	// write may have landed, and only the stored object can tell. Errors
	// that never left the process (the caller's reader failing) are not
	// requests and say nothing about the stored object.
	var oe *smithy.OperationError
	lost := errors.As(err, &oe) && status == 0 && code == "" && ctx.Err() == nil
	if c.conditional() && (isPrecondition(err) || lost) || c.writeID != "" && code == "NoSuchUpload" {
		// NoSuchUpload: a retried Complete whose first attempt completed
		// the upload (its answer lost, or replaced by a 503 SlowDown). In
		// every case the stored object tells.
		etag, ok, herr := s.ownWrite(ctx, okey, c.writeID)
		if ok {
			return etag, nil
		}
		if herr != nil {
			return "", fmt.Errorf("s3store: %s %q: %v; whether an earlier attempt of this write landed is unknown: %w", op, key, err, s.wrap("head", key, herr, false))
		}
		if code == "NoSuchUpload" {
			return "", s.wrap(op, key, err, false)
		}
	}
	if c.ifMatch != "" && code == "NoSuchKey" {
		// AWS answers If-Match on a missing key with 404; for PutIfMatch
		// that is a failed condition like any other.
		return "", fmt.Errorf("s3store: %s %q: no object to match: %w", op, key, blobstore.ErrPreconditionFailed)
	}
	return "", s.wrap(op, key, err, c.conditional())
}

// ownWrite reports whether the object at okey was written with writeID,
// and its ETag. A missing object is not ours; any other failure to read
// it is returned, since then nobody knows.
func (s *Store) ownWrite(ctx context.Context, okey, writeID string) (string, bool, error) {
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: &okey})
	if err != nil {
		if code, status := errCodes(err); code == "NotFound" || code == "NoSuchKey" || status == 404 {
			return "", false, nil
		}
		return "", false, err
	}
	for k, v := range out.Metadata {
		if strings.EqualFold(k, writeIDMeta) && v == writeID {
			return unquote(out.ETag), true, nil
		}
	}
	return "", false, nil
}

// part is one filled buffer on its way to a worker.
type part struct {
	num int32
	buf *[]byte
	n   int
	crc uint32 // CRC32C of (*buf)[:n], if uploads carry checksums
}

// putMultipart uploads first and the rest of r as a multipart upload and
// completes it under condition c. On any failure it aborts the upload.
// The parts' buffers come from bufs; first's is already one of them.
func (s *Store) putMultipart(ctx context.Context, okey string, bufs *partBudget, first part, r io.Reader, c condition) (string, error) {
	cin := &s3.CreateMultipartUploadInput{
		Bucket:   &s.bucket,
		Key:      &okey,
		Metadata: s.metadata(c),
	}
	s.setSSE(&cin.ServerSideEncryption, &cin.SSEKMSKeyId)
	if s.checksums {
		// A full-object checksum: Complete carries the CRC32C of the whole
		// object, which the server checks (checksum.go).
		cin.ChecksumAlgorithm = types.ChecksumAlgorithmCrc32c
		cin.ChecksumType = types.ChecksumTypeFullObject
	}
	// The record lets AbortIncompleteUploads find the upload after a
	// crash, whatever the server's listings say (records.go). It is
	// written before Create, so that even an upload whose Create answer
	// is lost is found, and again with the id once it is known, before
	// any part is sent.
	started := time.Now()
	if err := s.recordUpload(ctx, okey, c.writeID, "", started); err != nil {
		bufs.put(first.buf)
		return "", err
	}
	created, err := s.client.CreateMultipartUpload(ctx, cin)
	if err != nil {
		bufs.put(first.buf) // sent nowhere yet
		// The record stays if Create may have started an upload (no
		// answer, or a 5xx such as SlowDown after the server applied it);
		// a later sweep finds the upload under the key. A 4xx is a
		// definite refusal.
		if _, status := errCodes(err); status >= 400 && status < 500 {
			s.forgetUpload(okey, c.writeID)
		}
		return "", err
	}
	uploadID := created.UploadId
	if err := s.recordUpload(ctx, okey, c.writeID, aws.ToString(uploadID), started); err != nil {
		bufs.put(first.buf)
		return "", s.abort(okey, uploadID, c.writeID, err)
	}

	// upCtx is cancelled at the first failure, which stops the reader and
	// the other workers.
	upCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		mu        sync.Mutex
		completed []types.CompletedPart
		wg        sync.WaitGroup
	)
	parts := make(chan part) // unbuffered: Concurrency buffers in workers + 1 being filled
	for range s.conc {
		wg.Go(func() {
			for p := range parts {
				if upCtx.Err() != nil {
					bufs.put(p.buf) // failed already: drain without sending
					continue
				}
				pin := &s3.UploadPartInput{
					Bucket:        &s.bucket,
					Key:           &okey,
					UploadId:      uploadID,
					PartNumber:    aws.Int32(p.num),
					Body:          bytes.NewReader((*p.buf)[:p.n]),
					ContentLength: aws.Int64(int64(p.n)),
				}
				if s.checksums {
					pin.ChecksumAlgorithm = types.ChecksumAlgorithmCrc32c
					pin.ChecksumCRC32C = crc32cBase64(p.crc)
				}
				out, err := s.client.UploadPart(upCtx, pin)
				if err != nil {
					bufs.drop(p.buf) // the transport may still read it
					cancel(fmt.Errorf("upload part %d: %w", p.num, err))
					continue
				}
				bufs.put(p.buf)
				mu.Lock()
				completed = append(completed, types.CompletedPart{
					PartNumber:     aws.Int32(p.num),
					ETag:           out.ETag,
					ChecksumCRC32C: out.ChecksumCRC32C,
				})
				mu.Unlock()
			}
		})
	}

	send := func(p part) bool {
		select {
		case parts <- p:
			return true
		case <-upCtx.Done():
			return false
		}
	}
	// The whole object's CRC32C, folded from the parts' in order.
	objectCRC := first.crc
	readErr := func() error {
		if !send(first) {
			bufs.put(first.buf)
			return nil
		}
		for num := int32(2); ; num++ {
			// Blocks while Concurrency parts are being uploaded and the
			// last one read waits for a worker; fails once upCtx is done.
			buf, err := bufs.get(upCtx)
			if err != nil {
				return err
			}
			var crc uint32
			m, err := readFull(upCtx, r, *buf, s.crcOf(&crc))
			if err != nil && err != io.EOF {
				bufs.put(buf)
				return err
			}
			if m > 0 {
				if num > MaxParts {
					bufs.put(buf)
					return fmt.Errorf("object larger than %d parts of %d bytes (raise PartSize)", MaxParts, s.partSize)
				}
				objectCRC = crc32Combine(objectCRC, crc, int64(m))
				if !send(part{num: num, buf: buf, n: m, crc: crc}) {
					bufs.put(buf)
					return nil
				}
			} else {
				bufs.put(buf)
			}
			if err == io.EOF {
				return nil
			}
		}
	}()
	if readErr != nil {
		cancel(readErr) // stop the workers now rather than after their parts
	}
	close(parts)
	wg.Wait()

	// The first failure wins: a worker's error cancels upCtx, which may
	// then surface in the reader as a cancellation.
	err = context.Cause(upCtx)
	if err == nil {
		err = ctx.Err() // the reader finished just as ctx was cancelled
	}
	if err != nil {
		return "", s.abort(okey, uploadID, c.writeID, err)
	}

	slices.SortFunc(completed, func(a, b types.CompletedPart) int { return int(*a.PartNumber - *b.PartNumber) })
	in := &s3.CompleteMultipartUploadInput{
		Bucket:          &s.bucket,
		Key:             &okey,
		UploadId:        uploadID,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: completed},
	}
	if s.checksums {
		in.ChecksumType = types.ChecksumTypeFullObject
		in.ChecksumCRC32C = crc32cBase64(objectCRC)
	}
	// S3 checks conditions only here, when the object would become
	// visible; Create and UploadPart take none.
	if c.ifNoneMatch {
		in.IfNoneMatch = aws.String("*")
	}
	if c.ifMatch != "" {
		in.IfMatch = aws.String(c.ifMatch)
	}
	out, err := s.client.CompleteMultipartUpload(ctx, in)
	if err != nil {
		// A failed Complete (412 included) leaves the upload and its parts
		// pending until aborted.
		return "", s.abort(okey, uploadID, c.writeID, err)
	}
	s.forgetUpload(okey, c.writeID)
	return unquote(out.ETag), nil
}

// abort aborts a multipart upload that failed with cause, and returns
// cause (with the abort's own failure appended, if any). It uses a fresh
// context: the caller's may be cancelled, which is often why we are
// aborting. If the abort fails too (the server is down),
// AbortIncompleteUploads removes the upload in a later sweep.
func (s *Store) abort(okey string, uploadID *string, writeID string, cause error) error {
	ctx, cancel := context.WithTimeout(context.Background(), abortTimeout)
	defer cancel()
	_, err := s.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{
		Bucket: &s.bucket, Key: &okey, UploadId: uploadID,
	})
	if err != nil {
		if code, _ := errCodes(err); code != "NoSuchUpload" {
			// The record stays: it is how a later Store finds the upload.
			s.abortMu.Lock()
			s.failedAborts = append(s.failedAborts, pendingUpload{key: okey, id: aws.ToString(uploadID), writeID: writeID})
			s.abortMu.Unlock()
			return fmt.Errorf("%w (abort of upload %s also failed, left for AbortIncompleteUploads: %v)",
				cause, aws.ToString(uploadID), err)
		}
	}
	s.forgetUpload(okey, writeID)
	return cause
}
