package s3store

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/integration/miniotest"
)

func TestWrongCredentialsAreAccessDeniedWithoutTheSecret(t *testing.T) {
	srv := miniotest.Shared(t)
	bucket := srv.NewBucket(t)
	const wrongSecret = "wrong-secret-Zq8xWv3u"
	for _, tc := range []struct {
		name           string
		access, secret string
		mustNotContain string
	}{
		{"wrong secret key", srv.AccessKey, wrongSecret, wrongSecret},
		{"unknown access key", "no-such-access-key", wrongSecret, wrongSecret},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(context.Background(), Options{
				Bucket: bucket, Endpoint: srv.Endpoint, Region: srv.Region, PathStyle: true,
				AccessKey: tc.access, SecretKey: tc.secret, MaxAttempts: 1,
			})
			if err != nil {
				t.Fatal(err)
			}
			err = s.Put(context.Background(), "k", strings.NewReader("x"))
			if !errors.Is(err, ErrAccessDenied) {
				t.Fatalf("got %v, want ErrAccessDenied", err)
			}
			msg := err.Error()
			if strings.Contains(msg, tc.mustNotContain) {
				t.Errorf("error reveals the secret: %s", msg)
			}
			for _, want := range []string{bucket, srv.Endpoint} {
				if !strings.Contains(msg, want) {
					t.Errorf("error does not name %q: %s", want, msg)
				}
			}
		})
	}
}

func TestMissingBucketIsNamed(t *testing.T) {
	srv := miniotest.Shared(t)
	const bucket = "tidemark-no-such-bucket"
	s, err := New(context.Background(), Options{
		Bucket: bucket, Endpoint: srv.Endpoint, Region: srv.Region, PathStyle: true,
		AccessKey: srv.AccessKey, SecretKey: srv.SecretKey,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, getErr := s.Get(ctx, "k")
	var listErr error
	for _, err := range s.List(ctx, "") {
		listErr = err
	}
	for name, err := range map[string]error{
		"put":  s.Put(ctx, "k", strings.NewReader("x")),
		"get":  getErr,
		"list": listErr,
	} {
		if !errors.Is(err, ErrBucketNotFound) {
			t.Errorf("%s: got %v, want ErrBucketNotFound", name, err)
			continue
		}
		if !strings.Contains(err.Error(), bucket) || !strings.Contains(err.Error(), srv.Endpoint) {
			t.Errorf("%s: error does not name bucket and endpoint: %v", name, err)
		}
	}
}

func TestUnreachableEndpointIsNamed(t *testing.T) {
	// A port that was free a moment ago: connections are refused.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "http://" + l.Addr().String()
	l.Close()
	s, err := New(context.Background(), Options{
		Bucket: "b", Endpoint: endpoint, PathStyle: true,
		AccessKey: "a", SecretKey: "s", MaxAttempts: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Stat(context.Background(), "k")
	if !errors.Is(err, ErrUnreachable) {
		t.Fatalf("got %v, want ErrUnreachable", err)
	}
	if errors.Is(err, blobstore.ErrNotFound) {
		t.Errorf("unreachable reported as not found: %v", err)
	}
	if !strings.Contains(err.Error(), endpoint) {
		t.Errorf("error does not name the endpoint %s: %v", endpoint, err)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"no bucket", Options{}},
		{"part size under S3's minimum", Options{Bucket: "b", PartSize: MinPartSize - 1}},
		{"part size over S3's maximum", Options{Bucket: "b", PartSize: MaxPartSize + 1}},
		{"negative concurrency", Options{Bucket: "b", Concurrency: -1}},
		{"unknown sse", Options{Bucket: "b", SSE: "rot13"}},
		{"kms key without kms", Options{Bucket: "b", SSEKMSKeyID: "k"}},
		{"invalid prefix", Options{Bucket: "b", Prefix: "a/../b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Endpoint, tc.opts.AccessKey, tc.opts.SecretKey = "http://127.0.0.1:1", "a", "s"
			if _, err := New(context.Background(), tc.opts); err == nil {
				t.Fatal("New succeeded")
			}
		})
	}
}

func TestServerRefusalOfANameIsErrInvalidKey(t *testing.T) {
	// Requests sent past the key rules, straight with the client, as if
	// ValidateKey let through a key the server refuses: the store's error
	// classification must still say ErrInvalidKey. (Finding 9: MinIO's
	// 400 XMinioInvalidResourceName was an unclassified error.)
	s := newStore(t, miniotest.Shared(t), func(o *Options) { o.MaxAttempts = 1 })
	ctx := t.Context()
	long := strings.Repeat("k", blobstore.MaxKeyLen+1)
	for _, tc := range []struct {
		name string
		key  string
		call func(key string) error
	}{
		{"put backslash dot segment", `a\..\b`, func(k string) error {
			_, err := s.client.PutObject(ctx, &s3.PutObjectInput{Bucket: &s.bucket, Key: &k, Body: strings.NewReader("x")})
			return err
		}},
		{"put space-padded dot segment", "a/ .. /b", func(k string) error {
			_, err := s.client.PutObject(ctx, &s3.PutObjectInput{Bucket: &s.bucket, Key: &k, Body: strings.NewReader("x")})
			return err
		}},
		{"get backslash dot segment", `..\x`, func(k string) error {
			_, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: &k})
			return err
		}},
		{"list backslash dot prefix", `a\..`, func(k string) error {
			_, err := s.client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: &k})
			return err
		}},
		{"put over 1024 bytes", long, func(k string) error {
			_, err := s.client.PutObject(ctx, &s3.PutObjectInput{Bucket: &s.bucket, Key: &k, Body: strings.NewReader("x")})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := tc.call(tc.key)
			if raw == nil {
				t.Fatalf("the server accepted %.40q; the test needs a key it refuses", tc.key)
			}
			err := s.wrap("op", tc.key, raw, false)
			if !errors.Is(err, blobstore.ErrInvalidKey) {
				t.Fatalf("server answer %v classified as %v, want ErrInvalidKey", raw, err)
			}
		})
	}
}
