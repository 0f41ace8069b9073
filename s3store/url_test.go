package s3store

import (
	"context"
	"io"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/integration/miniotest"
)

func TestOpenURLWithCredentialsFromEnvironment(t *testing.T) {
	ctx := context.Background()
	srv := miniotest.Shared(t)
	bucket := srv.NewBucket(t)
	t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	u := "s3://" + bucket + "/jobs/one?endpoint=" + url.QueryEscape(srv.Endpoint) +
		"&path_style=true&region=" + srv.Region + "&part_size=5MiB&concurrency=2&checksum=when_required"
	bs, err := blobstore.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	if err := bs.Put(ctx, "k", strings.NewReader("hello")); err != nil {
		t.Fatal(err)
	}
	// The object is under the URL's prefix in the bucket.
	out, err := srv.S3Client(t).GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("jobs/one/k")})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Body.Close()
	if b, _ := io.ReadAll(out.Body); string(b) != "hello" {
		t.Fatalf("got %q", b)
	}
	st := bs.(*Store)
	if st.partSize != 5<<20 || st.conc != 2 || st.crc32 {
		t.Errorf("options not applied: part size %d, concurrency %d, crc32 %v", st.partSize, st.conc, st.crc32)
	}
}

func TestOptionsFromURL(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want Options
	}{
		{"s3://b", Options{Bucket: "b"}},
		{"s3://b/p/q/", Options{Bucket: "b", Prefix: "p/q"}},
		{"s3://b?region=eu-west-1&sse=aws:kms&sse_kms_key_id=key&max_attempts=9&part_size=16777216",
			Options{Bucket: "b", Region: "eu-west-1", SSE: "aws:kms", SSEKMSKeyID: "key", MaxAttempts: 9, PartSize: 16 << 20}},
		{"s3://b?part_size=1GiB&path_style=1&checksum=when_supported", Options{Bucket: "b", PartSize: 1 << 30, PathStyle: true}},
		{"s3://b?attempt_timeout=500ms&idle_timeout=none&operation_timeout=45s&max_backoff=2s&max_attempts=-1",
			Options{Bucket: "b", AttemptTimeout: 500 * time.Millisecond, IdleTimeout: -1, OperationTimeout: 45 * time.Second, MaxBackoff: 2 * time.Second, MaxAttempts: -1}},
	} {
		t.Run(tc.url, func(t *testing.T) {
			u, _ := url.Parse(tc.url)
			got, err := OptionsFromURL(u)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestOptionsFromURLRejects(t *testing.T) {
	for _, raw := range []string{
		"s3://AKIA:secret@b/p",      // credentials never in the URL
		"s3:///p",                   // no bucket
		"s3://b?regoin=x",           // typo: unknown parameter
		"s3://b?part_size=big",      // not a size
		"s3://b?concurrency=x",      // not a number
		"s3://b?checksum=sometimes", // not a mode
		"s3://b?region=a&region=b",  // twice
		"s3://b?path_style=perhaps", // not a bool
		"s3://b?attempt_timeout=10", // a duration needs a unit
		"s3://b?idle_timeout=-5s",   // "none", not a negative duration
	} {
		t.Run(raw, func(t *testing.T) {
			u, err := url.Parse(raw)
			if err != nil {
				t.Fatal(err)
			}
			_, err = OptionsFromURL(u)
			if err == nil {
				t.Fatal("accepted")
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("error reveals the password: %v", err)
			}
		})
	}
}
