package integration

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tidemark-io/tidemark/integration/miniotest"
	"github.com/tidemark-io/tidemark/s3store"
)

// s3Server is an S3-compatible server the store tests run against.
type s3Server struct {
	name                 string
	endpoint             string
	accessKey, secretKey string
	// newBucket creates a fresh bucket and returns its name.
	newBucket func(t *testing.T) string
}

// store opens an s3store.Store on a fresh bucket of srv under prefix.
func (srv s3Server) store(t *testing.T, prefix string, edit func(*s3store.Options)) *s3store.Store {
	t.Helper()
	opts := s3store.Options{
		Bucket: srv.newBucket(t), Prefix: prefix, Endpoint: srv.endpoint, Region: "us-east-1",
		PathStyle: true, AccessKey: srv.accessKey, SecretKey: srv.secretKey,
		// versitygw rejects the SDK's default CRC32 request checksums on
		// some requests; MinIO accepts both.
		ChecksumWhenRequired: srv.name == "versitygw",
	}
	if edit != nil {
		edit(&opts)
	}
	s, err := s3store.New(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func minioServer(t *testing.T) s3Server {
	srv := miniotest.Shared(t)
	return s3Server{
		name: "minio", endpoint: srv.Endpoint, accessKey: srv.AccessKey, secretKey: srv.SecretKey,
		newBucket: func(t *testing.T) string { return srv.NewBucket(t) },
	}
}

// Environment of the versitygw harness.
const (
	envVersitygwBin = "TIDEMARK_VERSITYGW_BIN" // path of the versitygw binary
	versitygwHint   = "install it with: CGO_ENABLED=0 GOBIN=~/.cache/tidemark/bin go install " +
		"github.com/versity/versitygw/cmd/versitygw@v1.8.0 (or set " + envVersitygwBin + ")"
)

// startVersitygw starts versitygw v1.8.0 (the second S3 implementation of
// DESIGN.md) with its posix backend on a temporary directory, as a child
// process stopped by PID in t.Cleanup. It skips the test, loudly, when
// the binary is not installed.
func startVersitygw(t *testing.T) s3Server {
	t.Helper()
	bin := os.Getenv(envVersitygwBin)
	if bin == "" {
		cache := os.Getenv("TIDEMARK_CACHE")
		if cache == "" {
			home, _ := os.UserHomeDir()
			cache = filepath.Join(home, ".cache", "tidemark")
		}
		bin = filepath.Join(cache, "bin", "versitygw")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("SKIP: versitygw not installed (%v); %s", err, versitygwHint)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	dir := t.TempDir()
	const access, secret = "tidemark", "tidemark-secret-key"
	cmd := exec.Command(bin, "--port", addr, "--quiet", "posix", dir)
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+access, "ROOT_SECRET_KEY="+secret)
	logf, err := os.Create(filepath.Join(t.TempDir(), "versitygw.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // by PID: this child only
		<-exited
		logf.Close()
	})
	srv := s3Server{name: "versitygw", endpoint: "http://" + addr, accessKey: access, secretKey: secret}
	client := s3.New(s3.Options{
		BaseEndpoint: aws.String(srv.endpoint), Region: "us-east-1", UsePathStyle: true,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: access, SecretAccessKey: secret}, nil
		}),
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		_, err := client.ListBuckets(ctx, &s3.ListBucketsInput{})
		cancel()
		if err == nil {
			break
		}
		select {
		case werr := <-exited:
			b, _ := os.ReadFile(logf.Name())
			t.Fatalf("versitygw exited (%v) before it was ready:\n%s", werr, b)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("versitygw at %s not ready after 30 s: %v", addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	n := 0
	srv.newBucket = func(t *testing.T) string {
		n++
		name := "tm-" + strconv.Itoa(n) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		if _, err := client.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
			var ae interface{ ErrorCode() string }
			if !errors.As(err, &ae) {
				t.Fatalf("create bucket %q on versitygw: %v", name, err)
			}
			t.Fatalf("create bucket %q on versitygw: %s: %v", name, ae.ErrorCode(), err)
		}
		return name
	}
	return srv
}
