package s3store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"math"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tidemark-io/tidemark/blobstore"
)

// Get opens the object at key for reading; the caller closes it.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	rc, _, err := s.GetWithInfo(ctx, key)
	return rc, err
}

var _ blobstore.InfoGetter = (*Store)(nil)

// GetWithInfo is Get that also returns the object's info, from the
// GetObject response's headers: one request instead of a HEAD and a GET.
func (s *Store) GetWithInfo(ctx context.Context, key string) (io.ReadCloser, blobstore.ObjectInfo, error) {
	okey, err := s.objectKey(key)
	if err != nil {
		return nil, blobstore.ObjectInfo{}, err
	}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: &okey}, getOptions(ctx)...)
	if err != nil {
		return nil, blobstore.ObjectInfo{}, s.wrap("get", key, err, false)
	}
	info := blobstore.ObjectInfo{
		Key:     key,
		Size:    aws.ToInt64(out.ContentLength),
		ETag:    unquote(out.ETag),
		ModTime: aws.ToTime(out.LastModified),
	}
	if blobstore.ContentVerified(ctx) {
		return getBody{out.Body}, info, nil // no checksum checked: nothing to report
	}
	return checkedBody{out.Body, key}, info, nil
}

// getOptions returns the options of a whole-object GET in ctx: none, or,
// where the caller verifies the content itself
// (blobstore.WithContentVerified), no response checksum validation. The
// SDK otherwise asks for the object's checksum and computes the CRC32 of
// every byte it reads (3% of a restore's CPU), which the caller's SHA-256
// makes redundant.
func getOptions(ctx context.Context) []func(*s3.Options) {
	if !blobstore.ContentVerified(ctx) {
		return nil
	}
	return []func(*s3.Options){func(o *s3.Options) {
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	}}
}

// GetRange opens length bytes of the object at key from offset (to the
// end if length is negative). A range past the end is cut at the end; one
// that starts at or past the end reads nothing.
func (s *Store) GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	okey, err := s.objectKey(key)
	if err != nil {
		return nil, err
	}
	if offset < 0 {
		return nil, fmt.Errorf("s3store: get-range %q: negative offset %d", key, offset)
	}
	if length == 0 {
		// No HTTP range is empty; Stat still reports a missing key.
		if _, err := s.Stat(ctx, key); err != nil {
			return nil, err
		}
		return io.NopCloser(strings.NewReader("")), nil
	}
	in := &s3.GetObjectInput{Bucket: &s.bucket, Key: &okey, Range: rangeHeader(offset, length)}
	out, err := s.client.GetObject(ctx, in)
	if err != nil {
		// 416: the range starts at or past the end (every range of an
		// empty object does). That reads nothing if the object exists.
		if code, status := errCodes(err); status == 416 || code == "InvalidRange" {
			if _, err := s.Stat(ctx, key); err != nil {
				return nil, err
			}
			return io.NopCloser(strings.NewReader("")), nil
		}
		return nil, s.wrap("get-range", key, err, false)
	}
	// Nothing to check (no checksum covers a range); WriteTo as Get's.
	return getBody{out.Body}, nil
}

// rangeHeader returns the HTTP Range for length bytes from offset (to the
// end if length is negative), or nil for the whole object. length must not
// be 0. A length whose last byte would lie past math.MaxInt64 ("read to
// the end" written as offset, MaxInt64) means to the end as well: the
// object cannot be that long, and offset+length-1 would overflow into a
// negative, invalid range that servers ignore, answering with the whole
// object instead of the part asked for.
func rangeHeader(offset, length int64) *string {
	switch {
	case length > 0 && length <= math.MaxInt64-offset:
		return aws.String(fmt.Sprintf("bytes=%d-%d", offset, offset+length-1))
	case offset > 0:
		return aws.String(fmt.Sprintf("bytes=%d-", offset))
	}
	return nil
}

// Stat returns the object's size, ETag and modification time.
func (s *Store) Stat(ctx context.Context, key string) (blobstore.ObjectInfo, error) {
	okey, err := s.objectKey(key)
	if err != nil {
		return blobstore.ObjectInfo{}, err
	}
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: &okey})
	if err != nil {
		return blobstore.ObjectInfo{}, s.wrap("stat", key, err, false)
	}
	return blobstore.ObjectInfo{
		Key:     key,
		Size:    aws.ToInt64(out.ContentLength),
		ETag:    unquote(out.ETag),
		ModTime: aws.ToTime(out.LastModified),
	}, nil
}

// Exists reports whether an object is stored at key.
func (s *Store) Exists(ctx context.Context, key string) (bool, error) {
	_, err := s.Stat(ctx, key)
	if errors.Is(err, blobstore.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// List yields the objects whose keys start with prefix, in lexicographic
// order, one ListObjectsV2 page (up to 1000 keys) at a time.
func (s *Store) List(ctx context.Context, prefix string) iter.Seq2[blobstore.ObjectInfo, error] {
	return func(yield func(blobstore.ObjectInfo, error) bool) {
		if err := blobstore.ValidatePrefix(prefix); err != nil {
			yield(blobstore.ObjectInfo{}, err)
			return
		}
		full := s.prefix + prefix
		pages := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{
			Bucket: &s.bucket,
			Prefix: aws.String(full),
		})
		for pages.HasMorePages() {
			page, err := pages.NextPage(ctx)
			if err != nil {
				yield(blobstore.ObjectInfo{}, s.wrap("list", prefix, err, false))
				return
			}
			for _, o := range page.Contents {
				if isRecord(strings.TrimPrefix(aws.ToString(o.Key), s.prefix)) {
					continue // an upload record (records.go), not an object
				}
				info := blobstore.ObjectInfo{
					Key:     strings.TrimPrefix(aws.ToString(o.Key), s.prefix),
					Size:    aws.ToInt64(o.Size),
					ETag:    unquote(o.ETag),
					ModTime: aws.ToTime(o.LastModified),
				}
				if !yield(info, nil) {
					return
				}
			}
		}
	}
}

// Delete removes the object at key; deleting a missing key succeeds.
func (s *Store) Delete(ctx context.Context, key string) error {
	okey, err := s.objectKey(key)
	if err != nil {
		return err
	}
	_, err = s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: &okey})
	if err != nil {
		err = s.wrap("delete", key, err, false)
		if errors.Is(err, blobstore.ErrNotFound) {
			return nil
		}
	}
	return err
}

var _ blobstore.ConditionalDeleter = (*Store)(nil)

// DeleteIfMatch deletes key only while its ETag is etag (DeleteObject with
// If-Match, which AWS S3 has enforced since 2025-09): ErrPreconditionFailed
// when it differs, ErrNotFound when the key is absent. A server that ignores
// the header deletes unconditionally, which is what Delete does anyway.
func (s *Store) DeleteIfMatch(ctx context.Context, key, etag string) error {
	okey, err := s.objectKey(key)
	if err != nil {
		return err
	}
	_, err = s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: &okey, IfMatch: aws.String(quote(etag))})
	if err != nil {
		return s.wrap("delete if match", key, err, true)
	}
	return nil
}
