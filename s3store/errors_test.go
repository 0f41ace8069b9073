package s3store

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

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

// fakeIMDS answers every instance metadata request with 403, as the
// metadata service of a host without a role (or a sandbox) does: the SDK
// then logs "WARN falling back to IMDSv1" and finds no credentials.
func fakeIMDS(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "forbidden", http.StatusForbidden)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// withoutCredentials empties the AWS credential chain for the test: no
// environment keys, no profile files, the metadata service at imds ("" to
// disable it).
func withoutCredentials(t *testing.T, imds string) {
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
		"AWS_DEFAULT_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE"} {
		t.Setenv(k, "")
	}
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", home+"/none")
	t.Setenv("AWS_CONFIG_FILE", home+"/none")
	if imds == "" {
		t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	} else {
		t.Setenv("AWS_EC2_METADATA_DISABLED", "false")
		t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds)
	}
}

// captureStderr runs f with os.Stderr redirected and returns what was
// written to it.
func captureStderr(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stderr
	os.Stderr = w
	got := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		got <- string(b)
	}()
	defer func() { os.Stderr = old }()
	f()
	os.Stderr = old
	w.Close()
	return <-got
}

func TestNoCredentialsSaysHowToProvideThem(t *testing.T) {
	// Finding 10: with no credentials at all the error said "access
	// denied" and the SDK printed its own WARN line to the terminal.
	for _, tc := range []struct{ name, imds string }{
		{"metadata service answers 403", "fake"},
		{"metadata service disabled", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			imds := tc.imds
			if imds == "fake" {
				imds = fakeIMDS(t)
			}
			withoutCredentials(t, imds)
			var err error
			stderr := captureStderr(t, func() {
				s, nerr := New(t.Context(), Options{Bucket: "b", Endpoint: "http://127.0.0.1:9", PathStyle: true, MaxAttempts: 1})
				if nerr != nil {
					t.Fatal(nerr)
				}
				err = s.Put(t.Context(), "k", strings.NewReader("x"))
			})
			if !errors.Is(err, ErrNoCredentials) {
				t.Fatalf("got %v, want ErrNoCredentials", err)
			}
			if errors.Is(err, ErrAccessDenied) {
				t.Errorf("reported as access denied too: %v", err)
			}
			for _, want := range []string{"no AWS credentials found", "AWS_ACCESS_KEY_ID", "AWS_PROFILE", "role"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error does not say %q: %v", want, err)
				}
			}
			if stderr != "" {
				t.Errorf("the SDK wrote to stderr: %q", stderr)
			}
		})
	}
}

func TestSDKLogLinesGoToTheLogger(t *testing.T) {
	withoutCredentials(t, fakeIMDS(t))
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	stderr := captureStderr(t, func() {
		s, err := New(t.Context(), Options{Bucket: "b", Endpoint: "http://127.0.0.1:9", PathStyle: true, MaxAttempts: 1, Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		_ = s.Put(t.Context(), "k", strings.NewReader("x"))
	})
	if stderr != "" {
		t.Errorf("the SDK wrote to stderr: %q", stderr)
	}
	// The IMDSv1 fallback, said on every machine off EC2, is demoted to
	// Debug: at Warn it came before the missing-credentials error.
	if !strings.Contains(buf.String(), "level=DEBUG") || !strings.Contains(buf.String(), "IMDSv1") || !strings.Contains(buf.String(), "component=aws-sdk") {
		t.Fatalf("the SDK's IMDS line did not reach the logger at Debug; logger got %q", buf.String())
	}
	for line := range strings.Lines(buf.String()) {
		if strings.Contains(line, "IMDSv1") && !strings.Contains(line, "level=DEBUG") {
			t.Errorf("the IMDSv1 fallback logged above Debug: %s", line)
		}
	}
}

// A store that does not answer says so while it retries, once per
// retryLogInterval, instead of staying silent until the operation gives
// up (a demo on an endpoint down at start-up printed nothing for 45 s).
func TestRetriesAreLoggedOncePerInterval(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "http://" + l.Addr().String()
	l.Close()
	var logs bytes.Buffer
	s, err := New(context.Background(), Options{
		Bucket: "b", Endpoint: endpoint, PathStyle: true, AccessKey: "a", SecretKey: "s",
		MaxAttempts: 4, MaxBackoff: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Stat(context.Background(), "k"); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("got %v, want ErrUnreachable", err)
	}
	out := logs.String()
	if n := strings.Count(out, "s3store: an attempt failed; retrying"); n != 1 {
		t.Fatalf("%d retry warnings for 3 retries within %v, want 1:\n%s", n, retryLogInterval, out)
	}
	for _, want := range []string{endpoint, "connection refused", "gives_up_after="} {
		if !strings.Contains(out, want) {
			t.Errorf("the retry warning lacks %q:\n%s", want, out)
		}
	}
}

func TestHTTPSAgainstPlainHTTPIsNotRetried(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNotFound)
	}))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	endpoint := "https://" + srv.Listener.Addr().String()
	s, err := New(t.Context(), Options{
		Bucket: "b", Endpoint: endpoint, PathStyle: true,
		AccessKey: "a", SecretKey: "s", MaxAttempts: 5,
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Stat(t.Context(), "k")
	if !errors.Is(err, ErrNotTLS) {
		t.Fatalf("Stat over https against a plain-HTTP server: %v, want ErrNotTLS", err)
	}
	if !strings.Contains(err.Error(), endpoint) || !strings.Contains(err.Error(), "http://") {
		t.Errorf("error does not name the endpoint %s and say to use http://: %v", endpoint, err)
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d connections for one Stat with 5 attempts allowed: a wrong URL was retried as if transient", n)
	}
}
