package s3store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/tidemark-io/tidemark/blobstore"
)

// Listing multipart uploads is where S3-compatible stores differ most.
// MinIO (pinned version, checked by this package's tests) matches the
// Prefix of ListMultipartUploads only against whole object keys: a
// partial prefix such as "jobs/" lists nothing, and after a server
// restart even the empty prefix lists nothing until a request names the
// exact key. uploads therefore asks twice, with the prefix and with no
// prefix (filtering itself), and callers that know the key of a failed
// upload pass it whole. MinIO also expires stale uploads itself (after
// 24 hours by default), so what no listing finds does not stay forever.

// uploads returns the multipart uploads whose keys start with the store
// key prefix full.
func (s *Store) uploads(ctx context.Context, full string) ([]types.MultipartUpload, error) {
	var all []types.MultipartUpload
	seen := map[string]bool{}
	queries := []string{full}
	if full != "" {
		queries = append(queries, "")
	}
	for _, q := range queries {
		in := &s3.ListMultipartUploadsInput{Bucket: &s.bucket}
		if q != "" {
			in.Prefix = aws.String(q)
		}
		pages := s3.NewListMultipartUploadsPaginator(s.client, in)
		for pages.HasMorePages() {
			page, err := pages.NextPage(ctx)
			if err != nil {
				return nil, err
			}
			for _, u := range page.Uploads {
				id := aws.ToString(u.UploadId)
				if !strings.HasPrefix(aws.ToString(u.Key), full) || seen[id] {
					continue
				}
				seen[id] = true
				all = append(all, u)
			}
		}
	}
	return all, nil
}

// AbortIncompleteUploads aborts every multipart upload under prefix (a
// key prefix of the store, "" for all) that was started more than
// olderThan ago, and returns how many it aborted. A Put whose abort
// failed too (the server was down, or the process died) would otherwise
// leave its parts, and their cost, behind; garbage collection calls this
// with a grace period longer than any upload in progress. It finds
// uploads three ways: the uploads of this Store whose abort failed, by
// key and upload id, whatever their age; the upload records every Store
// on this bucket and prefix writes (see records.go), by key and upload id,
// which needs no listing and so survives both a process restart and
// MinIO's listing after a server restart; and ListMultipartUploads, for
// uploads started by other clients.
func (s *Store) AbortIncompleteUploads(ctx context.Context, prefix string, olderThan time.Duration) (int, error) {
	if err := blobstore.ValidatePrefix(prefix); err != nil {
		return 0, err
	}
	n, err := s.retryFailedAborts(ctx, s.prefix+prefix)
	if err != nil {
		return n, err
	}
	m, err := s.abortRecorded(ctx, s.prefix+prefix, olderThan)
	n += m
	if err != nil {
		return n, err
	}
	cutoff := time.Now().Add(-olderThan)
	ups, err := s.uploads(ctx, s.prefix+prefix)
	if err != nil {
		return n, s.wrap("abort-incomplete-uploads", prefix, err, false)
	}
	for _, u := range ups {
		if u.Initiated != nil && u.Initiated.After(cutoff) {
			continue
		}
		_, err := s.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{
			Bucket: &s.bucket, Key: u.Key, UploadId: u.UploadId,
		})
		if err != nil {
			if code, _ := errCodes(err); code == "NoSuchUpload" {
				continue // completed or aborted meanwhile
			}
			return n, s.wrap("abort-incomplete-uploads", aws.ToString(u.Key), err, false)
		}
		n++
	}
	return n, nil
}

// retryFailedAborts aborts the remembered uploads under the store key
// prefix full whose abort failed earlier, and forgets those that are
// gone. It returns how many it aborted.
func (s *Store) retryFailedAborts(ctx context.Context, full string) (int, error) {
	s.abortMu.Lock()
	pending := s.failedAborts
	s.failedAborts = nil
	s.abortMu.Unlock()
	n := 0
	var keep []pendingUpload
	var firstErr error
	for _, u := range pending {
		if !strings.HasPrefix(u.key, full) || firstErr != nil {
			keep = append(keep, u)
			continue
		}
		_, err := s.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{
			Bucket: &s.bucket, Key: aws.String(u.key), UploadId: aws.String(u.id),
		})
		switch code, _ := errCodes(err); {
		case err == nil:
			n++
			s.forgetUpload(u.key, u.writeID)
		case code == "NoSuchUpload":
			// Completed, aborted or expired meanwhile.
			s.forgetUpload(u.key, u.writeID)
		default:
			keep = append(keep, u)
			firstErr = s.wrap("abort-incomplete-uploads", strings.TrimPrefix(u.key, s.prefix), err, false)
		}
	}
	s.abortMu.Lock()
	s.failedAborts = append(s.failedAborts, keep...)
	s.abortMu.Unlock()
	return n, firstErr
}

// IncompleteUploads returns the keys (relative to the store) of the
// multipart uploads in progress or left behind under prefix: those
// recorded (see AbortIncompleteUploads) and those the server lists.
func (s *Store) IncompleteUploads(ctx context.Context, prefix string) ([]string, error) {
	if err := blobstore.ValidatePrefix(prefix); err != nil {
		return nil, err
	}
	ups, err := s.uploads(ctx, s.prefix+prefix)
	if err != nil {
		return nil, s.wrap("list-uploads", prefix, err, false)
	}
	keys, err := s.recordedKeys(ctx, s.prefix+prefix)
	if err != nil {
		return nil, err
	}
	for _, u := range ups {
		if k := strings.TrimPrefix(aws.ToString(u.Key), s.prefix); !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys, nil
}

func (s *Store) describe() string {
	return fmt.Sprintf("bucket %q at %s", s.bucket, s.endpoint)
}
