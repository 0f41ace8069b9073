package s3store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/tidemark-io/tidemark/blobstore"
)

// Upload records. Every multipart upload a Store starts is recorded in a
// small object under its own prefix, at
//
//	<prefix>/.tidemark-uploads/<hash of key and write id>
//
// holding the object key and when it started, written before
// CreateMultipartUpload and rewritten with the upload id once Create has
// answered (a Put whose record cannot be written fails before sending a
// part), and deleted once the upload is completed or aborted. A record
// outlives its upload only when the process died, or the server went
// away, before the abort: then AbortIncompleteUploads of any later Store
// on the same bucket and prefix aborts the upload by key and id, which
// works on every server whatever its listings say (MinIO, after a
// restart, lists an upload only under its exact key), and also every
// upload the server lists under that exact key: a Create whose answer was
// lost (a 503 SlowDown after the server applied it, say) and was retried
// started an upload whose id nobody learned.
//
// The records live inside the store's prefix, so that a policy that
// grants a job its prefix covers them and deleting the prefix deletes
// them; ".tidemark-uploads" is a reserved segment that no key may have
// (blobstore.ValidateKey refuses it on every store), and List never
// yields a record. Cost: two small PUTs and one DELETE per multipart
// upload (objects over PartSize), none for single-part writes.

// recordsDir is the reserved segment (blobstore.ReservedUploadsSegment)
// under which upload records live.
const recordsDir = blobstore.ReservedUploadsSegment

// uploadRecord is the content of a record.
type uploadRecord struct {
	Key       string    `json:"key"`                 // bucket key, prefix included
	UploadID  string    `json:"upload_id,omitempty"` // "" until Create answered
	Initiated time.Time `json:"initiated"`
}

// recordKey returns the bucket key of the record of the upload of okey
// by the write tagged writeID.
func (s *Store) recordKey(okey, writeID string) string {
	h := sha256.Sum256([]byte(okey + "\x00" + writeID))
	return s.prefix + recordsDir + "/" + hex.EncodeToString(h[:20])
}

// isRecord reports whether the bucket key okey lies in a records
// directory (of this store or of a store under a longer prefix).
func isRecord(okey string) bool {
	return strings.HasPrefix(okey, recordsDir+"/") || strings.Contains(okey, "/"+recordsDir+"/")
}

// recordUpload writes the record of the upload of okey by the write
// tagged writeID: before CreateMultipartUpload with id "", after it with
// the upload id.
func (s *Store) recordUpload(ctx context.Context, okey, writeID, id string, started time.Time) error {
	body, err := json.Marshal(uploadRecord{Key: okey, UploadID: id, Initiated: started.UTC()})
	if err != nil {
		return err
	}
	rkey := s.recordKey(okey, writeID)
	in := &s3.PutObjectInput{
		Bucket: &s.bucket, Key: &rkey, Body: bytes.NewReader(body), ContentLength: aws.Int64(int64(len(body))),
	}
	s.setSSE(&in.ServerSideEncryption, &in.SSEKMSKeyId)
	if s.checksums {
		in.ChecksumAlgorithm = types.ChecksumAlgorithmCrc32c
		in.ChecksumCRC32C = crc32cBase64(crc32.Checksum(body, castagnoli))
	}
	if _, err := s.client.PutObject(ctx, in); err != nil {
		return fmt.Errorf("record multipart upload: %w", err)
	}
	return nil
}

// forgetUpload deletes the record of an upload that is completed or
// aborted. It uses a fresh context (the caller's may be cancelled); a
// record it fails to delete is removed by a later AbortIncompleteUploads,
// to which the upload is then already gone.
func (s *Store) forgetUpload(okey, writeID string) {
	if writeID == "" {
		return // not started by this package's Put
	}
	ctx, cancel := context.WithTimeout(context.Background(), abortTimeout)
	defer cancel()
	rkey := s.recordKey(okey, writeID)
	_, _ = s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: &rkey})
}

// abortRecorded aborts the uploads recorded under this store whose keys
// start with the bucket key prefix full and that started more than
// olderThan ago, and deletes their records. It returns how many uploads
// it aborted.
func (s *Store) abortRecorded(ctx context.Context, full string, olderThan time.Duration) (int, error) {
	cutoff := time.Now().Add(-olderThan)
	dir := s.prefix + recordsDir + "/"
	pages := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: &dir})
	n := 0
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return n, s.wrap("abort-incomplete-uploads", recordsDir, err, false)
		}
		for _, o := range page.Contents {
			rec, err := s.readRecord(ctx, aws.ToString(o.Key))
			if errors.Is(err, blobstore.ErrNotFound) {
				continue // deleted meanwhile
			}
			if err != nil {
				return n, err
			}
			if !strings.HasPrefix(rec.Key, full) || rec.Initiated.After(cutoff) {
				continue
			}
			m, err := s.abortUploadsOf(ctx, rec, cutoff)
			n += m
			if err != nil {
				return n, err
			}
			if _, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: o.Key}); err != nil {
				return n, s.wrap("abort-incomplete-uploads", strings.TrimPrefix(aws.ToString(o.Key), s.prefix), err, false)
			}
		}
	}
	return n, nil
}

// abortUploadsOf aborts the upload rec names, by id, and every upload
// the server lists under exactly its key that started before cutoff. It
// returns how many it aborted.
func (s *Store) abortUploadsOf(ctx context.Context, rec uploadRecord, cutoff time.Time) (int, error) {
	rel := strings.TrimPrefix(rec.Key, s.prefix)
	ids := map[string]bool{}
	if rec.UploadID != "" {
		ids[rec.UploadID] = true
	}
	ups, err := s.uploads(ctx, rec.Key)
	if err != nil {
		return 0, s.wrap("abort-incomplete-uploads", rel, err, false)
	}
	for _, u := range ups {
		if aws.ToString(u.Key) == rec.Key && (u.Initiated == nil || u.Initiated.Before(cutoff)) {
			ids[aws.ToString(u.UploadId)] = true
		}
	}
	n := 0
	for id := range ids {
		_, err := s.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{
			Bucket: &s.bucket, Key: aws.String(rec.Key), UploadId: aws.String(id),
		})
		switch code, _ := errCodes(err); {
		case err == nil:
			n++
		case code == "NoSuchUpload":
			// Completed, aborted or expired: only the record is left.
		default:
			return n, s.wrap("abort-incomplete-uploads", rel, err, false)
		}
	}
	return n, nil
}

// recordedKeys returns the store keys of the recorded uploads under the
// bucket key prefix full.
func (s *Store) recordedKeys(ctx context.Context, full string) ([]string, error) {
	dir := s.prefix + recordsDir + "/"
	pages := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: &dir})
	var keys []string
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, s.wrap("list-uploads", recordsDir, err, false)
		}
		for _, o := range page.Contents {
			rec, err := s.readRecord(ctx, aws.ToString(o.Key))
			if errors.Is(err, blobstore.ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, err
			}
			if strings.HasPrefix(rec.Key, full) {
				keys = append(keys, strings.TrimPrefix(rec.Key, s.prefix))
			}
		}
	}
	return keys, nil
}

// readRecord reads and parses the record at bucket key rkey.
func (s *Store) readRecord(ctx context.Context, rkey string) (uploadRecord, error) {
	rel := strings.TrimPrefix(rkey, s.prefix)
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: &rkey})
	if err != nil {
		return uploadRecord{}, s.wrap("read upload record", rel, err, false)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(io.LimitReader(out.Body, 64<<10))
	if err != nil {
		return uploadRecord{}, s.wrap("read upload record", rel, err, false)
	}
	var rec uploadRecord
	if err := json.Unmarshal(b, &rec); err != nil || rec.Key == "" || rec.UploadID == "" {
		return uploadRecord{}, fmt.Errorf("s3store: upload record %q is not one: %v", rel, err)
	}
	return rec, nil
}
