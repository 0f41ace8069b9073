package s3store

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/tidemark-io/tidemark/blobstore"
)

// Cleanup budgets of Probe: what it wrote is removed even after a
// failure, but briefly, and more briefly after the caller gave up.
const (
	// probeCleanupTimeout bounds the requests that remove what Probe
	// wrote: less than a real upload's abort, since a server that holds
	// writes (a MinIO cluster below write quorum does, for minutes) must
	// not hold the caller of a failed probe as long.
	probeCleanupTimeout = 5 * time.Second
	// cancelledCleanupTimeout bounds them when the caller's context is
	// done (Ctrl-C): it must not wait for a dead endpoint.
	cancelledCleanupTimeout = 2 * time.Second
)

// Probe checks that the endpoint enforces conditional writes, which
// fencing and pointer moves rely on: some S3-compatible servers accept
// If-None-Match and If-Match and ignore them, or enforce them one writer
// at a time but not between writers racing. It is ProbeReport without the
// report; see there for what it checks and costs.
func (s *Store) Probe(ctx context.Context) error {
	_, err := s.ProbeReport(ctx)
	return err
}

// ProbeReport checks that the endpoint enforces conditional writes, and
// reports what else it supports. Under a random key below
// "_tidemark_probe/" it checks that
//
//   - PutIfAbsent creates the key, and a second PutIfAbsent fails;
//
//   - PutIfMatch with a wrong ETag fails, and with the right one succeeds;
//
//   - PutIfMatch on a missing key fails (MinIO once created it, #21526);
//
//   - CompleteMultipartUpload, where S3 checks the conditions of a large
//     write, refuses If-None-Match: * on the existing key and If-Match
//     with a wrong ETag, and accepts If-Match with the right one (a server
//     may check conditions on PutObject only: then every object larger
//     than a part would be written unconditionally);
//
//   - racing writers of one key do not both win: in each of a few rounds,
//     several PutIfAbsent of a fresh key, then several PutIfMatch of one
//     key with the same ETag, are sent at once, and exactly one of each
//     must succeed and be what the key then holds (SeaweedFS once let
//     every racing create through, #8800);
//
//   - with Options.SSE, the object written (last by a multipart upload)
//     is reported encrypted as asked (one HEAD): versitygw's posix
//     backend accepts the header and stores the object in the clear;
//
// then reports, without requiring them, whether DeleteObject honours
// If-Match, whether uploads' CRC32C and CRC64NVME checksums are verified
// and whether a key with '\' keeps it, and deletes what it wrote.
//
// The multipart check costs one upload of a single 1-byte part (S3 lets
// the last part, here the only one, be of any size) completed three
// times: a failed Complete leaves the upload pending, as on AWS. The
// racing checks cost probeRaceRounds × probeRaceWriters PUTs of a few
// bytes for each kind, plus a GET per round and a HEAD per losing writer
// (PutIfAbsent and PutIfMatch look whether a failed write was their own);
// docs/servers.md gives the total.
//
// An endpoint that lets a write through that should have failed is
// ErrConditionsIgnored, with a message naming the property that failed;
// any other failure (access, missing bucket, a cluster below write
// quorum) is returned as it is.
func (s *Store) ProbeReport(ctx context.Context) (blobstore.ProbeReport, error) {
	return s.probeReport(ctx, probeRaceRounds, probeRaceWriters)
}

// probeReport is ProbeReport with rounds of writers racing writers.
func (s *Store) probeReport(ctx context.Context, rounds, writers int) (report blobstore.ProbeReport, err error) {
	base := "_tidemark_probe/" + newWriteID()
	key, missing := base+"/object", base+"/missing"
	var uploadID *string // a pending multipart upload of key
	written := &probeKeys{keys: []string{key, missing}}
	defer func() {
		// Clean up even if ctx is done; a failure here only leaves a
		// few bytes under _tidemark_probe/, so it does not override the
		// probe's answer.
		budget := probeCleanupTimeout
		if ctx.Err() != nil {
			budget = cancelledCleanupTimeout
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), budget)
		defer cancel()
		if uploadID != nil {
			if okey, kerr := s.objectKey(key); kerr == nil {
				_, _ = s.client.AbortMultipartUpload(cctx, &s3.AbortMultipartUploadInput{
					Bucket: &s.bucket, Key: &okey, UploadId: uploadID,
				})
			}
		}
		s.deleteAll(cctx, written.all())
	}()
	ignored := func(what string) error {
		return fmt.Errorf("%w: %s: %s succeeded", ErrConditionsIgnored, s.describe(), what)
	}
	failed := func(err error) error {
		return fmt.Errorf("s3store: probe %s: %w", s.describe(), err)
	}
	etag, err := s.PutIfAbsent(ctx, key, strings.NewReader("probe 1"))
	if err != nil {
		return report, failed(err)
	}
	switch _, err := s.PutIfAbsent(ctx, key, strings.NewReader("probe 2")); {
	case err == nil:
		return report, ignored("If-None-Match: * on an existing object")
	case !errors.Is(err, blobstore.ErrPreconditionFailed):
		return report, failed(err)
	}
	switch _, err := s.PutIfMatch(ctx, key, "00000000000000000000000000000000", strings.NewReader("probe 3")); {
	case err == nil:
		return report, ignored("If-Match with a wrong ETag")
	case !errors.Is(err, blobstore.ErrPreconditionFailed):
		return report, failed(err)
	}
	if etag, err = s.PutIfMatch(ctx, key, etag, strings.NewReader("probe 4")); err != nil {
		return report, fmt.Errorf("s3store: probe %s: If-Match with the current ETag: %w", s.describe(), err)
	}
	switch _, err := s.PutIfMatch(ctx, missing, etag, strings.NewReader("probe 5")); {
	case err == nil:
		return report, ignored("If-Match on a missing object")
	case !errors.Is(err, blobstore.ErrPreconditionFailed) && !errors.Is(err, blobstore.ErrNotFound):
		return report, failed(err)
	}

	// Multipart: the same conditions on CompleteMultipartUpload.
	okey, err := s.objectKey(key)
	if err != nil {
		return report, failed(err)
	}
	complete, err := s.probeUpload(ctx, okey, &uploadID)
	if err != nil {
		return report, failed(err)
	}
	for _, c := range []struct {
		what                 string
		ifNoneMatch, ifMatch *string
	}{
		{"If-None-Match: * on CompleteMultipartUpload of an existing object", aws.String("*"), nil},
		{"If-Match with a wrong ETag on CompleteMultipartUpload", nil, aws.String(`"00000000000000000000000000000000"`)},
	} {
		switch _, err := complete(c.ifNoneMatch, c.ifMatch); {
		case err == nil:
			uploadID = nil // completed: nothing to abort, key is overwritten
			return report, ignored(c.what)
		case !isPrecondition(err):
			return report, fmt.Errorf("s3store: probe %s: %s: %w", s.describe(), c.what, s.wrap("complete-multipart-upload", key, err, true))
		}
	}
	if _, err := complete(nil, aws.String(quote(etag))); err != nil {
		return report, fmt.Errorf("s3store: probe %s: If-Match with the current ETag on CompleteMultipartUpload: %w", s.describe(), s.wrap("complete-multipart-upload", key, err, true))
	}
	uploadID = nil
	if err := s.probeSSE(ctx, key, okey); err != nil {
		return report, err
	}

	// Racing writers: the property a single writer cannot show.
	if err := s.probeRaces(ctx, base, rounds, writers, written); err != nil {
		return report, err
	}
	report.RaceRounds, report.RaceWriters = rounds, writers

	// Reported, not required.
	if report.ConditionalDelete, err = s.probeConditionalDelete(ctx, base+"/delete", written); err != nil {
		return report, failed(err)
	}
	if report.Checksums, err = s.probeChecksums(ctx, base+"/checksum", written); err != nil {
		return report, failed(err)
	}
	if report.KeysKeepBackslash, err = s.probeBackslash(ctx, base, written); err != nil {
		return report, failed(err)
	}
	return report, nil
}

// probeUpload starts a multipart upload of okey with one 1-byte part,
// records its id in *uploadID (for the caller's cleanup), and returns a
// function completing it under the given conditions.
func (s *Store) probeUpload(ctx context.Context, okey string, uploadID **string) (func(ifNoneMatch, ifMatch *string) (*s3.CompleteMultipartUploadOutput, error), error) {
	cin := &s3.CreateMultipartUploadInput{Bucket: &s.bucket, Key: &okey}
	s.setSSE(&cin.ServerSideEncryption, &cin.SSEKMSKeyId)
	if s.checksums { // as putMultipart does
		cin.ChecksumAlgorithm = types.ChecksumAlgorithmCrc32c
		cin.ChecksumType = types.ChecksumTypeFullObject
	}
	created, err := s.client.CreateMultipartUpload(ctx, cin)
	if err != nil {
		return nil, s.wrap("create-multipart-upload", okey, err, false)
	}
	*uploadID = created.UploadId
	pin := &s3.UploadPartInput{
		Bucket: &s.bucket, Key: &okey, UploadId: created.UploadId,
		PartNumber: aws.Int32(1), Body: strings.NewReader("6"), ContentLength: aws.Int64(1),
	}
	var full *string
	if s.checksums {
		full = crc32cBase64(crc32.Checksum([]byte("6"), castagnoli))
		pin.ChecksumAlgorithm = types.ChecksumAlgorithmCrc32c
		pin.ChecksumCRC32C = full
	}
	part, err := s.client.UploadPart(ctx, pin)
	if err != nil {
		return nil, s.wrap("upload-part", okey, err, false)
	}
	parts := []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: part.ETag, ChecksumCRC32C: part.ChecksumCRC32C}}
	return func(ifNoneMatch, ifMatch *string) (*s3.CompleteMultipartUploadOutput, error) {
		in := &s3.CompleteMultipartUploadInput{
			Bucket: &s.bucket, Key: &okey, UploadId: created.UploadId,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
			IfNoneMatch:     ifNoneMatch,
			IfMatch:         ifMatch,
		}
		if full != nil {
			in.ChecksumType, in.ChecksumCRC32C = types.ChecksumTypeFullObject, full
		}
		return s.client.CompleteMultipartUpload(ctx, in)
	}, nil
}

// probeSSE checks, when the store asks for server-side encryption, that
// the endpoint says it applied it to key (object key okey): HEAD reports
// the algorithm asked for and, for SSE-KMS with a key named, that key. A
// server that accepts the header and does not say so is
// blobstore.ErrSSENotApplied.
func (s *Store) probeSSE(ctx context.Context, key, okey string) error {
	if s.sse == "" {
		return nil
	}
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: &okey})
	if err != nil {
		return fmt.Errorf("s3store: probe %s: %w", s.describe(), s.wrap("head", key, err, false))
	}
	got, kms := out.ServerSideEncryption, aws.ToString(out.SSEKMSKeyId)
	switch {
	case got != s.sse:
		return fmt.Errorf("%w: %s: a write with x-amz-server-side-encryption: %s succeeded and HEAD reports %q", blobstore.ErrSSENotApplied, s.describe(), s.sse, got)
	case s.kmsKey != "" && !strings.HasSuffix(kms, s.kmsKey):
		return fmt.Errorf("%w: %s: a write under KMS key %q succeeded and HEAD reports key %q", blobstore.ErrSSENotApplied, s.describe(), s.kmsKey, kms)
	}
	return nil
}
