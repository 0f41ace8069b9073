package s3store

import (
	"context"
	"errors"
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
	if st.partSize != 5<<20 || st.conc != 2 || st.checksums {
		t.Errorf("options not applied: part size %d, concurrency %d, checksums %v", st.partSize, st.conc, st.checksums)
	}
}

func TestOptionsFromURL(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want Options
	}{
		{"s3://bkt", Options{Bucket: "bkt"}},
		{"s3://bkt/p/q/", Options{Bucket: "bkt", Prefix: "p/q"}},
		{"s3://bkt?region=eu-west-1&sse=aws:kms&sse_kms_key_id=key&max_attempts=9&part_size=16777216",
			Options{Bucket: "bkt", Region: "eu-west-1", SSE: "aws:kms", SSEKMSKeyID: "key", MaxAttempts: 9, PartSize: 16 << 20}},
		{"s3://bkt?part_size=1GiB&path_style=1&checksum=when_supported", Options{Bucket: "bkt", PartSize: 1 << 30, PathStyle: true}},
		{"s3://bkt?unsigned_payload=true", Options{Bucket: "bkt", UnsignedPayload: true}},
		{"s3://bkt?attempt_timeout=500ms&idle_timeout=none&operation_timeout=45s&max_backoff=2s&max_attempts=-1",
			Options{Bucket: "bkt", AttemptTimeout: 500 * time.Millisecond, IdleTimeout: -1, OperationTimeout: 45 * time.Second, MaxBackoff: 2 * time.Second, MaxAttempts: -1}},
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
		"s3://AKIA:secret@bkt/p",      // credentials never in the URL
		"s3:///p",                     // no bucket
		"s3://bkt?regoin=x",           // typo: unknown parameter
		"s3://bkt?part_size=big",      // not a size
		"s3://bkt?concurrency=x",      // not a number
		"s3://bkt?checksum=sometimes", // not a mode
		"s3://bkt?region=a&region=b",  // twice
		"s3://bkt?path_style=perhaps", // not a bool
		"s3://bkt?attempt_timeout=10", // a duration needs a unit
		"s3://bkt?idle_timeout=-5s",   // "none", not a negative duration
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

// A bucket S3's naming rules forbid, and a fragment, fail when the URL is
// opened (ErrInvalidURL), not at the first request; names real buckets
// have (dots, hyphens, digits) are accepted.
func TestOptionsFromURLValidatesTheBucketAndRefusesAFragment(t *testing.T) {
	for _, bucket := range []string{"B_ad", "Bucket", "under_score", "ab", strings.Repeat("a", 64), "a..b", "-ab", "ab-", ".ab", "192.168.5.4", "sp ace"} {
		_, err := OptionsFromURL(&url.URL{Scheme: "s3", Host: bucket, Path: "/p"})
		if !errors.Is(err, blobstore.ErrInvalidURL) || !strings.Contains(err.Error(), "bucket") {
			t.Errorf("bucket %q: %v, want ErrInvalidURL about the bucket", bucket, err)
		}
	}
	for _, bucket := range []string{"abc", "my.bucket-1", "tm-0123", strings.Repeat("a", 63), "1.2.3", "a-b.c-d"} {
		if o, err := OptionsFromURL(&url.URL{Scheme: "s3", Host: bucket}); err != nil || o.Bucket != bucket {
			t.Errorf("bucket %q: %+v, %v", bucket, o, err)
		}
	}
	for _, raw := range []string{"s3://bkt/p#frag", "s3://bkt#x"} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := OptionsFromURL(u); !errors.Is(err, blobstore.ErrInvalidURL) || !strings.Contains(err.Error(), "fragment") {
			t.Errorf("%s: %v, want ErrInvalidURL about the fragment", raw, err)
		}
	}
}

// Without a region the error says first how a CLI user gives one.
func TestNoRegionSaysHowToGiveOne(t *testing.T) {
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	t.Setenv("AWS_PROFILE", "")
	_, err := New(t.Context(), Options{Bucket: "bkt"})
	if err == nil || !strings.Contains(err.Error(), "no region: add ?region= to the store URL or set AWS_REGION") {
		t.Fatalf("New without a region: %v", err)
	}
}
