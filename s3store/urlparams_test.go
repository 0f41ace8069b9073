package s3store

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tidemark-io/tidemark/blobstore"
)

// TestOpenURLValidatesEveryParameter opens bad URLs against a server that
// counts requests: each fails at blobstore.Open with ErrInvalidURL and a
// message naming the parameter and what it accepts, and no request is
// sent. A good URL against the same server opens (and still sends
// nothing), so the server would have seen a request had Open sent one.
func TestOpenURLValidatesEveryParameter(t *testing.T) {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer srv.Close()
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	ep := "endpoint=" + url.QueryEscape(srv.URL) + "&path_style=true&"
	ctx := context.Background()

	good := "s3://bkt/p?" + ep + "part_size=5MiB&concurrency=1&max_attempts=1&operation_timeout=45s&sse=AES256&region=us-east-1"
	bs, err := blobstore.Open(ctx, good)
	if err != nil {
		t.Fatalf("good URL refused: %v", err)
	}
	// The server answers; a request does reach it.
	if _, err := bs.Exists(ctx, "k"); err == nil {
		t.Fatal("Exists against a server answering 500 succeeded")
	}
	if requests.Load() == 0 {
		t.Fatal("the counting server saw no request from a good store")
	}
	requests.Store(0)

	for _, tc := range []struct{ url, want string }{
		{"s3://bkt?" + ep + "part_size=1MiB", "part_size=\"1MiB\": want a size from 5MiB to 5GiB"},
		{"s3://bkt?" + ep + "part_size=6GiB", "part_size=\"6GiB\": want a size from 5MiB to 5GiB"},
		{"s3://bkt?" + ep + "part_size=0", "part_size=\"0\": want a size"},
		{"s3://bkt?" + ep + "part_size=-5", "part_size=\"-5\": want a size"},
		{"s3://bkt?" + ep + "concurrency=0", "concurrency=\"0\": want a positive number"},
		{"s3://bkt?" + ep + "concurrency=-2", "concurrency=\"-2\": want a positive number"},
		{"s3://bkt?" + ep + "sse=AES255", "sse=\"AES255\": want AES256 or aws:kms"},
		{"s3://bkt?" + ep + "sse=", "sse=\"\": want AES256 or aws:kms"},
		{"s3://bkt?" + ep + "sse_kms_key_id=k", "sse_kms_key_id needs sse=aws:kms"},
		{"s3://bkt?" + ep + "sse=aws:kms&sse_kms_key_id=", "sse_kms_key_id=\"\": want a KMS key"},
		{"s3://bkt?endpoint=htp://127.0.0.1:9000", "endpoint=\"htp://127.0.0.1:9000\": scheme \"htp\": want an http:// or https:// URL"},
		{"s3://bkt?endpoint=127.0.0.1:9000", "endpoint=\"127.0.0.1:9000\": "},
		{"s3://bkt?endpoint=http://", "endpoint=\"http://\": no host"},
		{"s3://bkt?endpoint=http:///x", "endpoint=\"http:///x\": no host"},
		{"s3://bkt?endpoint=http://h:99999", "endpoint=\"http://h:99999\": "},
		{"s3://bkt?endpoint=" + url.QueryEscape("http://u:pw@h:9000"), "credentials in the endpoint are refused"},
		{"s3://bkt?endpoint=" + url.QueryEscape("http://h:9000/?x=1"), "query or fragment"},
		{"s3://bkt?endpoint=", "endpoint=\"\": "},
		{"s3://bkt?" + ep + "region=", "region=\"\": want a region name"},
		{"s3://bkt?" + ep + "region=eu%20west", "region=\"eu west\": want a region name"},
		{"s3://bkt?endpoint=" + url.QueryEscape(srv.URL) + "&path_style=perhaps", "path_style=\"perhaps\": want true or false"},
		{"s3://bkt?" + ep + "max_attempts=0", "max_attempts=\"0\": want a positive number of attempts"},
		{"s3://bkt?" + ep + "max_attempts=-3", "max_attempts=\"-3\": want a positive number of attempts"},
		{"s3://bkt?" + ep + "max_attempts=-1&operation_timeout=none", "max_attempts=-1 needs an operation_timeout"},
		{"s3://bkt?" + ep + "max_backoff=none", "max_backoff=\"none\": want a positive duration"},
		{"s3://bkt?" + ep + "max_backoff=0s", "max_backoff=\"0s\": want a positive duration"},
		{"s3://bkt?" + ep + "attempt_timeout=0", "attempt_timeout=\"0\": want a positive duration"},
		{"s3://bkt?" + ep + "idle_timeout=-5s", "idle_timeout=\"-5s\": want a positive duration"},
		{"s3://bkt?" + ep + "operation_timeout=10", "operation_timeout=\"10\": want a positive duration"},
		{"s3://bkt?" + ep + "checksum=sometimes", "checksum=\"sometimes\": want when_supported or when_required"},
		{"s3://bkt?" + ep + "regoin=x", "unknown parameter \"regoin\" (s3 URLs take region, endpoint"},
		{"s3://b:9000/p?" + ep, "has a port"},
		{"s3://bkt/a//c?" + ep, "prefix"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			bs, err := blobstore.Open(ctx, tc.url)
			if err == nil {
				t.Fatalf("opened %T", bs)
			}
			if !errors.Is(err, blobstore.ErrInvalidURL) {
				t.Errorf("error does not wrap ErrInvalidURL: %v", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "pw") {
				t.Errorf("error reveals the password: %v", err)
			}
			if n := requests.Load(); n != 0 {
				t.Errorf("%d requests sent", n)
			}
		})
	}
}
