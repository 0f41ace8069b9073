package miniotest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// NewBucket creates a bucket with a fresh name on s and returns the name.
// The name is derived from the test's name (so a leftover bucket points at
// its test) plus random hex (so parallel tests and reruns never collide).
//
// On a server the harness owns the bucket goes away with the server; on an
// external server (TIDEMARK_MINIO_ENDPOINT) it is emptied and deleted in
// t.Cleanup, best effort.
func (s *Server) NewBucket(t testing.TB) string {
	t.Helper()
	name := bucketName(t.Name())
	client := s.S3Client(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("miniotest: create bucket %q on %s: %v", name, s.Endpoint, err)
	}
	if s.mode == ModeExternal {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := removeBucket(ctx, client, name); err != nil {
				t.Logf("miniotest: remove bucket %q from external server: %v", name, err)
			}
		})
	}
	return name
}

// bucketName builds a valid S3 bucket name (3-63 characters of [a-z0-9-],
// starting and ending with a letter or digit) from a test name.
func bucketName(testName string) string {
	var b strings.Builder
	b.WriteString("tm-")
	dash := true // collapse runs of separators into one dash
	for _, r := range strings.ToLower(testName) {
		if b.Len() >= 3+40 {
			break
		}
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			dash = false
		} else if !dash {
			b.WriteByte('-')
			dash = true
		}
	}
	if !dash {
		b.WriteByte('-')
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:]) // crypto/rand.Read never fails
	b.WriteString(hex.EncodeToString(rnd[:]))
	return b.String()
}

// removeBucket aborts the bucket's incomplete multipart uploads, deletes its
// objects and then the bucket.
func removeBucket(ctx context.Context, client *s3.Client, bucket string) error {
	uploads := s3.NewListMultipartUploadsPaginator(client, &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket)})
	for uploads.HasMorePages() {
		page, err := uploads.NextPage(ctx)
		if err != nil {
			return err
		}
		for _, u := range page.Uploads {
			if _, err := client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{
				Bucket: aws.String(bucket), Key: u.Key, UploadId: u.UploadId,
			}); err != nil {
				return err
			}
		}
	}
	objects := s3.NewListObjectsV2Paginator(client, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	for objects.HasMorePages() {
		page, err := objects.NextPage(ctx)
		if err != nil {
			return err
		}
		if len(page.Contents) == 0 {
			continue
		}
		ids := make([]types.ObjectIdentifier, 0, len(page.Contents))
		for _, o := range page.Contents {
			ids = append(ids, types.ObjectIdentifier{Key: o.Key})
		}
		if _, err := client.DeleteObjects(ctx, &s3.DeleteObjectsInput{
			Bucket: aws.String(bucket), Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)},
		}); err != nil {
			return err
		}
	}
	_, err := client.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(bucket)})
	return err
}
