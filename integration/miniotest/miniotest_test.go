package miniotest

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// TestMain runs the tests, leaving out the TestHelper* functions unless
// this binary was re-executed as the child process one of them is the
// body of: so they are never reported as skipped tests in a normal run.
func TestMain(m *testing.M) {
	flag.Parse()
	if os.Getenv(helperEnv) != "1" {
		if err := flag.Set("test.skip", "^TestHelper"); err != nil {
			panic(err)
		}
	}
	os.Exit(Main(m))
}

// modes returns the modes this machine can test. Both are tested whenever
// both are possible; a mode that is impossible fails the test, unless
// TIDEMARK_MINIO deliberately forces the other one.
func modes(t *testing.T) []string {
	t.Helper()
	var ms []string
	forced := os.Getenv(EnvMode)
	if err := dockerAvailable(t.Context()); err == nil {
		ms = append(ms, ModeDocker)
	} else if forced != ModeProcess {
		t.Fatalf("Docker is not available (%v); set %s=process to test process mode only", err, EnvMode)
	} else {
		t.Logf("docker mode not tested: %s=process and Docker is not available: %v", EnvMode, err)
	}
	if _, err := binaryPath(); err == nil {
		ms = append(ms, ModeProcess)
	} else if forced != ModeDocker {
		t.Fatal(err)
	} else {
		t.Logf("process mode not tested: %s=docker and %v", EnvMode, err)
	}
	return ms
}

// startIn starts a dedicated server in the given mode, like Start does for
// the mode the environment selects, and logs how long the start took.
func startIn(t *testing.T, mode string) *Server {
	t.Helper()
	begin := time.Now()
	var s *Server
	if mode == ModeDocker {
		s = startDockerT(t, "", "")
	} else {
		s = startProcessT(t)
	}
	t.Logf("%s start took %v (%s at %s)", mode, time.Since(begin).Round(time.Millisecond), s.b.id(), s.Endpoint)
	if s.Mode() != mode {
		t.Fatalf("Mode() = %q, want %q", s.Mode(), mode)
	}
	return s
}

func forEachMode(t *testing.T, f func(t *testing.T, mode string)) {
	for _, mode := range modes(t) {
		t.Run(mode, func(t *testing.T) { f(t, mode) })
	}
}

func put(t *testing.T, s *Server, bucket, key string, body []byte) {
	t.Helper()
	_, err := s.S3Client(t).PutObject(t.Context(), &s3.PutObjectInput{
		Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(body),
	})
	if err != nil {
		t.Fatalf("PutObject %s/%s: %v", bucket, key, err)
	}
}

func get(t *testing.T, s *Server, bucket, key string) []byte {
	t.Helper()
	out, err := s.S3Client(t).GetObject(t.Context(), &s3.GetObjectInput{
		Bucket: aws.String(bucket), Key: aws.String(key),
	})
	if err != nil {
		t.Fatalf("GetObject %s/%s: %v", bucket, key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatalf("read %s/%s: %v", bucket, key, err)
	}
	return b
}

func TestStartServesPutAndGet(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode string) {
		s := startIn(t, mode)
		if s.Region != "us-east-1" || s.AccessKey == "" || s.SecretKey == "" {
			t.Fatalf("server credentials = %q/%q region %q", s.AccessKey, s.SecretKey, s.Region)
		}
		if u, err := url.Parse(s.Endpoint); err != nil || u.Scheme != "http" || u.Hostname() != "127.0.0.1" || u.Port() == "" {
			t.Fatalf("Endpoint = %q, want http://127.0.0.1:<port>", s.Endpoint)
		}
		bucket := s.NewBucket(t)
		want := []byte("tidemark " + mode)
		put(t, s, bucket, "dir/object", want)
		if got := get(t, s, bucket, "dir/object"); !bytes.Equal(got, want) {
			t.Fatalf("GetObject = %q, want %q", got, want)
		}
	})
}

func TestNewBucketCreatesDistinctBuckets(t *testing.T) {
	s := Shared(t)
	a, b := s.NewBucket(t), s.NewBucket(t)
	if a == b {
		t.Fatalf("two NewBucket calls returned the same name %q", a)
	}
	for _, name := range []string{a, b} {
		if _, err := s.S3Client(t).HeadBucket(t.Context(), &s3.HeadBucketInput{Bucket: aws.String(name)}); err != nil {
			t.Fatalf("HeadBucket %q: %v", name, err)
		}
	}
}

func TestStopRefusesRequestsAndRestartKeepsDataAndEndpoint(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode string) {
		s := startIn(t, mode)
		bucket := s.NewBucket(t)
		put(t, s, bucket, "k", []byte("before stop"))
		endpoint := s.Endpoint

		s.Stop(t)
		if err := dial(s.Endpoint); err == nil {
			t.Fatalf("%s still accepts connections after Stop", s.Endpoint)
		}

		begin := time.Now()
		s.Restart(t)
		t.Logf("%s restart took %v", mode, time.Since(begin).Round(time.Millisecond))
		if s.Endpoint != endpoint {
			t.Fatalf("Endpoint changed across restart: %q -> %q", endpoint, s.Endpoint)
		}
		// The client taken before the stop must work again: tests hold
		// clients across a restart.
		if got := get(t, s, bucket, "k"); string(got) != "before stop" {
			t.Fatalf("after restart GetObject = %q, want %q", got, "before stop")
		}
	})
}

func TestKillThenRestartKeepsData(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode string) {
		s := startIn(t, mode)
		bucket := s.NewBucket(t)
		put(t, s, bucket, "k", []byte("before kill"))

		s.Kill(t)
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		_, err := s.S3Client(t).HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(bucket)}, func(o *s3.Options) {
			o.RetryMaxAttempts = 1
		})
		if err == nil {
			t.Fatal("HeadBucket succeeded on a killed server")
		}

		s.Restart(t)
		if got := get(t, s, bucket, "k"); string(got) != "before kill" {
			t.Fatalf("after restart GetObject = %q, want %q", got, "before kill")
		}
	})
}

func TestCleanupRemovesServer(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode string) {
		var (
			containerID, endpoint string
			pid                   int
		)
		// The server lives in a subtest, whose cleanups have run when t.Run
		// returns.
		t.Run("inner", func(t *testing.T) {
			s := startIn(t, mode)
			containerID, pid, endpoint = s.ContainerID(), s.PID(), s.Endpoint
		})
		switch mode {
		case ModeDocker:
			if containerID == "" {
				t.Fatal("docker server has no container id")
			}
			exists, err := containerExists(t.Context(), containerID)
			if err != nil {
				t.Fatalf("inspect container %s: %v", containerID, err)
			}
			if exists {
				t.Fatalf("container %s still exists after cleanup", containerID)
			}
		case ModeProcess:
			if pid == 0 {
				t.Fatal("process server has no pid")
			}
			// The harness waits for its child, so the pid is reaped: signal 0
			// must find no such process (barring pid reuse within the test).
			if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
				t.Fatalf("pid %d after cleanup: kill(0) = %v, want ESRCH", pid, err)
			}
		}
		if err := dial(endpoint); err == nil {
			t.Fatalf("%s still accepts connections after cleanup", endpoint)
		}
	})
}

func TestSharedReturnsOneServerPerBinary(t *testing.T) {
	a, b := Shared(t), Shared(t)
	if a != b {
		t.Fatalf("Shared returned two servers: %s and %s", a.Endpoint, b.Endpoint)
	}
	var inSubtest *Server
	t.Run("subtest", func(t *testing.T) { inSubtest = Shared(t) })
	if inSubtest != a {
		t.Fatal("Shared in a subtest returned another server")
	}
	// The server survives the end of the test that started it.
	if err := dial(a.Endpoint); err != nil {
		t.Fatalf("shared server gone after its first user ended: %v", err)
	}
}

func TestStartUsesExternalEndpoint(t *testing.T) {
	owner := Shared(t)
	t.Setenv(EnvEndpoint, owner.Endpoint)
	t.Setenv(EnvAccessKey, owner.AccessKey)
	t.Setenv(EnvSecretKey, owner.SecretKey)

	var bucket string
	t.Run("inner", func(t *testing.T) {
		s := Start(t)
		if s.Mode() != ModeExternal || s.Endpoint != owner.Endpoint {
			t.Fatalf("Start with %s set = %s at %s, want external at %s", EnvEndpoint, s.Mode(), s.Endpoint, owner.Endpoint)
		}
		bucket = s.NewBucket(t)
		put(t, s, bucket, "k", []byte("v"))
	})
	// On a server the harness does not own, the bucket is removed in cleanup.
	_, err := owner.S3Client(t).HeadBucket(t.Context(), &s3.HeadBucketInput{Bucket: aws.String(bucket)})
	var notFound *types.NotFound
	if !errors.As(err, &notFound) {
		t.Fatalf("HeadBucket %q after cleanup = %v, want NotFound: the bucket must be removed from an external server", bucket, err)
	}
}

func TestStartHonoursForcedMode(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode string) {
		t.Setenv(EnvMode, mode)
		if s := Start(t); s.Mode() != mode {
			t.Fatalf("Start with %s=%s started a %s server", EnvMode, mode, s.Mode())
		}
	})
}

// TestStartWithoutMinioFailsWithInstallHint runs a test binary in which no
// MinIO can be started and checks that the test fails (not skips) and says
// how to install MinIO.
func TestStartWithoutMinioFailsWithInstallHint(t *testing.T) {
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestHelperStartWithoutMinio$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(),
		helperEnv+"=1",
		EnvMode+"="+ModeProcess, // Docker cannot be hidden from testcontainers' discovery; forcing process mode stands in for its absence
		EnvBin+"=",
		EnvCache+"="+t.TempDir(),
		EnvEndpoint+"=",
	)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("helper test: err = %v, want a failing exit\n%s", err, out)
	}
	for _, want := range []string{"--- FAIL: TestHelperStartWithoutMinio", "scripts/install-minio.sh"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("helper output lacks %q:\n%s", want, out)
		}
	}
	if bytes.Contains(out, []byte("--- SKIP")) {
		t.Errorf("helper test skipped instead of failing:\n%s", out)
	}
}

const helperEnv = "MINIOTEST_HELPER"

// TestHelperStartWithoutMinio is the body TestStartWithoutMinioFailsWithInstallHint
// runs in a child test binary; TestMain leaves it out of normal runs.
func TestHelperStartWithoutMinio(t *testing.T) {
	s := Start(t)
	t.Logf("unexpectedly started %s at %s", s.Mode(), s.Endpoint)
}

func TestChooseModeRejectsUnknownMode(t *testing.T) {
	t.Setenv(EnvMode, "kubernetes")
	if _, err := chooseMode(t.Context()); err == nil || !strings.Contains(err.Error(), EnvMode) {
		t.Fatalf("chooseMode with %s=kubernetes = %v, want an error naming %s", EnvMode, err, EnvMode)
	}
}

func TestMissingBinaryErrorSaysHowToInstall(t *testing.T) {
	t.Setenv(EnvBin, "")
	t.Setenv(EnvCache, t.TempDir())
	_, err := binaryPath()
	if !errors.Is(err, errNoMinio) || !strings.Contains(err.Error(), "scripts/install-minio.sh") {
		t.Fatalf("binaryPath with an empty cache = %v, want errNoMinio mentioning scripts/install-minio.sh", err)
	}
}

func TestBucketNameIsValidAndUnique(t *testing.T) {
	valid := regexp.MustCompile(`^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$`)
	for _, name := range []string{
		"TestX",
		"TestStart/docker",
		"Test_Under_Scores/sub#01",
		strings.Repeat("VeryLongTestName", 10),
		"Ünïcödé/…",
		"",
	} {
		got := bucketName(name)
		if !valid.MatchString(got) || strings.Contains(got, "--") {
			t.Errorf("bucketName(%q) = %q: not a valid bucket name", name, got)
		}
		if again := bucketName(name); again == got {
			t.Errorf("bucketName(%q) returned %q twice", name, got)
		}
	}
}

func TestInstallScriptPinsMinioVersion(t *testing.T) {
	script, err := os.ReadFile("../../scripts/install-minio.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^PINNED_VERSION="([^"]+)"$`).FindSubmatch(script)
	if m == nil {
		t.Fatal("scripts/install-minio.sh has no PINNED_VERSION line")
	}
	if string(m[1]) != MinioVersion {
		t.Fatalf("scripts/install-minio.sh pins %s, MinioVersion is %s", m[1], MinioVersion)
	}
}

// dial reports whether something accepts TCP connections at endpoint.
func dial(endpoint string) error {
	u, err := url.Parse(endpoint)
	if err != nil {
		return err
	}
	c, err := net.DialTimeout("tcp", u.Host, time.Second)
	if err != nil {
		return err
	}
	return c.Close()
}

// TestVersityServesConditionalWrites starts versitygw in every mode this
// machine can run and checks the basics the other packages' versitygw
// tests build on: a bucket, a put and a get, and If-None-Match enforced.
func TestVersityServesConditionalWrites(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode string) {
		begin := time.Now()
		t.Setenv(EnvMode, mode)
		s := StartVersity(t)
		t.Logf("%s start took %v (%s at %s)", mode, time.Since(begin).Round(time.Millisecond), s.b.id(), s.Endpoint)
		if s.Kind() != "versitygw" || s.Mode() != mode {
			t.Fatalf("Kind, Mode = %q, %q", s.Kind(), s.Mode())
		}
		bucket := s.NewBucket(t)
		put(t, s, bucket, "k", []byte("v"))
		_, err := s.S3Client(t).PutObject(t.Context(), &s3.PutObjectInput{
			Bucket: aws.String(bucket), Key: aws.String("k"), Body: strings.NewReader("w"), IfNoneMatch: aws.String("*"),
		})
		if err == nil {
			t.Fatal("versitygw let If-None-Match: * overwrite an existing object")
		}
		if b := get(t, s, bucket, "k"); string(b) != "v" {
			t.Fatalf("got %q, want %q", b, "v")
		}
	})
}

func TestInstallScriptPinsVersityVersion(t *testing.T) {
	script, err := os.ReadFile("../../scripts/install-versitygw.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^VERSION="\$\{VERSITYGW_VERSION:-([^}]+)\}"$`).FindSubmatch(script)
	if m == nil {
		t.Fatal("scripts/install-versitygw.sh has no VERSION line")
	}
	if string(m[1]) != VersityVersion {
		t.Fatalf("scripts/install-versitygw.sh pins %s, VersityVersion is %s", m[1], VersityVersion)
	}
}
