package miniotest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// MinioVersion is the pinned version of the github.com/minio/minio module the
// tests run against. scripts/install-minio.sh installs the same version (a
// test checks that the two agree).
const MinioVersion = "v0.0.0-20260212201848-7aac2a2c5b7c"

// Modes reported by [Server.Mode] and accepted in TIDEMARK_MINIO.
const (
	ModeDocker   = "docker"   // a container of the image built by EnsureImage
	ModeProcess  = "process"  // a child process of the test binary
	ModeExternal = "external" // a server at TIDEMARK_MINIO_ENDPOINT, not owned by the harness
)

// Environment variables read by the harness.
const (
	EnvMode      = "TIDEMARK_MINIO"            // "docker", "process" or empty (docker if available)
	EnvEndpoint  = "TIDEMARK_MINIO_ENDPOINT"   // use this running server instead of starting one
	EnvAccessKey = "TIDEMARK_MINIO_ACCESS_KEY" // access key for EnvEndpoint
	EnvSecretKey = "TIDEMARK_MINIO_SECRET_KEY" // secret key for EnvEndpoint
	EnvBin       = "TIDEMARK_MINIO_BIN"        // path of the minio binary
	EnvCache     = "TIDEMARK_CACHE"            // cache root; the binary is at $TIDEMARK_CACHE/bin/minio
)

const (
	// Region is the region every server reports; MinIO accepts any region
	// in signatures but clients need one.
	Region = "us-east-1"

	// Credentials of the servers the harness starts. They are fixed rather
	// than random so that a failing test's server can be inspected by hand;
	// the servers listen on 127.0.0.1 (or a private Docker network) only.
	defaultAccessKey = "tidemark"
	defaultSecretKey = "tidemark-secret-key"

	// readyTimeout bounds how long a start or restart may take before the
	// server counts as broken. A cold container start takes about a second;
	// the margin is for a machine busy compiling.
	readyTimeout = 90 * time.Second

	// stopGrace is how long a graceful stop may take before SIGKILL.
	stopGrace = 5 * time.Second

	installHint = "install MinIO with scripts/install-minio.sh (builds " +
		"github.com/minio/minio@" + MinioVersion + " into $TIDEMARK_CACHE/bin/minio, " +
		"default $HOME/.cache/tidemark/bin/minio), or set " + EnvBin + " to a minio binary, or " +
		EnvEndpoint + " to a running server"
)

// errNoMinio is returned when the harness has no way to run MinIO.
var errNoMinio = errors.New("miniotest: no MinIO available")

// Server is a running MinIO server.
type Server struct {
	// Endpoint is the URL at which the test process reaches the server,
	// "http://127.0.0.1:<port>". It does not change across Stop and Restart.
	Endpoint string
	// AccessKey and SecretKey are the root credentials.
	AccessKey, SecretKey string
	// Region is the region clients should sign with ("us-east-1").
	Region string
	// NetworkAlias and NetworkEndpoint are set by StartOnNetwork: the alias
	// of the container on the Docker network, and the URL at which other
	// containers on that network reach the server ("http://<alias>:9000").
	NetworkAlias, NetworkEndpoint string

	mode string
	kind *serverKind // what runs: MinIO or versitygw

	mu         sync.Mutex
	b          backend // nil in external mode
	running    bool
	terminated bool
	client     *s3.Client
}

// backend is what differs between a container and a process.
type backend interface {
	// stop stops the server, gracefully (SIGTERM, then SIGKILL after
	// stopGrace) or not (SIGKILL at once); the data survives.
	stop(ctx context.Context, graceful bool) error
	// start starts a stopped server again on the same port and data.
	start(ctx context.Context) error
	// terminate stops the server and removes everything it owns.
	terminate(ctx context.Context) error
	// exited reports a non-nil error once the server is known to have died
	// by itself; readiness polling uses it to fail fast.
	exited(ctx context.Context) error
	// logs returns the tail of the server's output for failure messages.
	logs(ctx context.Context) string
	// id names the server for messages ("container 3f2a…", "pid 1234").
	id() string
}

// Mode reports how the server runs: ModeDocker, ModeProcess or ModeExternal.
func (s *Server) Mode() string { return s.mode }

// ContainerID returns the Docker container id, or "" in other modes.
func (s *Server) ContainerID() string {
	if c, ok := s.b.(*containerBackend); ok {
		return c.containerID
	}
	return ""
}

// PID returns the process id of a process-mode server while it runs, or 0.
func (s *Server) PID() int {
	if p, ok := s.b.(*processBackend); ok {
		return p.pid()
	}
	return 0
}

// Start starts a MinIO server for this test alone (in the mode chosen by the
// environment, see the package documentation) and removes it, by id, in
// t.Cleanup. It fails the test if no server can be started.
func Start(t testing.TB) *Server {
	t.Helper()
	if s, ok := externalServer(); ok {
		return s
	}
	mode, err := chooseMode(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	switch mode {
	case ModeDocker:
		return startDockerT(t, "", "")
	default:
		return startProcessT(t)
	}
}

// StartOnNetwork starts a MinIO container attached to the existing Docker
// network networkName under alias, for tests whose job containers must reach
// the server: they use s.NetworkEndpoint, the test uses s.Endpoint. It
// requires Docker whatever TIDEMARK_MINIO says, and removes the container
// in t.Cleanup.
func StartOnNetwork(t testing.TB, networkName, alias string) *Server {
	t.Helper()
	if networkName == "" || alias == "" {
		t.Fatal("miniotest: StartOnNetwork needs a network name and an alias")
	}
	if err := dockerAvailable(t.Context()); err != nil {
		t.Fatalf("miniotest: StartOnNetwork needs Docker: %v", err)
	}
	return startDockerT(t, networkName, alias)
}

func startDockerT(t testing.TB, networkName, alias string) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	s, err := startDocker(ctx, dockerOptions{kind: minioKind, network: networkName, alias: alias})
	if err != nil {
		t.Fatal(err)
	}
	registerCleanup(t, s)
	return s
}

func startProcessT(t testing.TB) *Server {
	t.Helper()
	// TempDir is created before the cleanup that stops the server is
	// registered, so (cleanups run last-in first-out) the server is stopped
	// before its data directory is removed.
	dir := t.TempDir()
	s, err := startProcess(t.Context(), minioKind, dir)
	if err != nil {
		t.Fatal(err)
	}
	registerCleanup(t, s)
	return s
}

func registerCleanup(t testing.TB, s *Server) {
	t.Cleanup(func() {
		// t.Context is already cancelled when cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.terminate(ctx); err != nil {
			t.Errorf("miniotest: remove %s: %v", s.b.id(), err)
		}
	})
}

// shared holds the servers shared by the tests of one test binary, one
// per kind (MinIO, versitygw), which Shared and SharedVersity hand out and
// Main removes. This is harness state for the life of a test binary, not
// library state.
var shared struct {
	mu      sync.Mutex
	inMain  bool
	servers map[string]*sharedServer // by kind name
}

type sharedServer struct {
	srv     *Server
	dataDir string // process mode: the data directory Main removes
}

// Shared returns the MinIO server shared by all tests of this test binary,
// started on first use. The package's TestMain must call Main, which
// removes it; a test must not Stop or Restart it (use Start for that).
func Shared(t testing.TB) *Server {
	t.Helper()
	if s, ok := externalServer(); ok {
		return s
	}
	return sharedOf(t, minioKind)
}

// sharedOf returns the shared server of kind k, starting it on first use
// in the mode the environment selects.
func sharedOf(t testing.TB, k *serverKind) *Server {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.inMain {
		t.Fatal("miniotest: Shared needs TestMain to call miniotest.Main (func TestMain(m *testing.M) { os.Exit(miniotest.Main(m)) }), which removes the shared server")
	}
	if e := shared.servers[k.name]; e != nil {
		return e.srv
	}
	// The shared server outlives the test that starts it, so it gets a
	// context of its own rather than t.Context.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	mode, err := chooseMode(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e := &sharedServer{}
	var s *Server
	if mode == ModeDocker {
		s, err = startDocker(ctx, dockerOptions{kind: k})
	} else {
		dir, derr := os.MkdirTemp("", "miniotest-shared-"+k.name+"-")
		if derr != nil {
			t.Fatalf("miniotest: shared data dir: %v", derr)
		}
		e.dataDir = dir
		s, err = startProcess(ctx, k, dir)
	}
	if err != nil {
		if e.dataDir != "" {
			_ = os.RemoveAll(e.dataDir)
		}
		t.Fatal(err)
	}
	e.srv = s
	if shared.servers == nil {
		shared.servers = map[string]*sharedServer{}
	}
	shared.servers[k.name] = e
	return s
}

// Main runs the tests and then removes the shared servers, if any were
// started. Use it in TestMain: os.Exit(miniotest.Main(m)). A shared server
// that cannot be removed turns a passing run into a failing one, since it
// leaks.
func Main(m *testing.M) int {
	shared.mu.Lock()
	shared.inMain = true
	shared.mu.Unlock()

	code := m.Run()

	shared.mu.Lock()
	defer shared.mu.Unlock()
	shared.inMain = false
	for name, e := range shared.servers {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if err := e.srv.terminate(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "miniotest: remove shared %s server %s: %v\n", name, e.srv.b.id(), err)
			if code == 0 {
				code = 1
			}
		}
		cancel()
		if e.dataDir != "" {
			if err := os.RemoveAll(e.dataDir); err != nil {
				fmt.Fprintf(os.Stderr, "miniotest: remove shared data dir: %v\n", err)
			}
		}
		delete(shared.servers, name)
	}
	return code
}

// externalServer returns the server named by TIDEMARK_MINIO_ENDPOINT.
func externalServer() (*Server, bool) {
	ep := os.Getenv(EnvEndpoint)
	if ep == "" {
		return nil, false
	}
	return &Server{
		Endpoint:  ep,
		AccessKey: envOr(EnvAccessKey, defaultAccessKey),
		SecretKey: envOr(EnvSecretKey, defaultSecretKey),
		Region:    Region,
		mode:      ModeExternal,
		kind:      minioKind,
		running:   true,
	}, true
}

// chooseMode applies TIDEMARK_MINIO.
func chooseMode(ctx context.Context) (string, error) {
	switch m := os.Getenv(EnvMode); m {
	case ModeDocker:
		if err := dockerAvailable(ctx); err != nil {
			return "", fmt.Errorf("miniotest: %s=docker but Docker is not available: %w", EnvMode, err)
		}
		return ModeDocker, nil
	case ModeProcess:
		return ModeProcess, nil
	case "":
		if dockerAvailable(ctx) == nil {
			return ModeDocker, nil
		}
		return ModeProcess, nil
	default:
		return "", fmt.Errorf("miniotest: %s=%q: want %q, %q or empty", EnvMode, m, ModeDocker, ModeProcess)
	}
}

// Stop stops the server gracefully, keeping its data, so that a test can
// see what a client does when the server vanishes; Restart brings it back.
func (s *Server) Stop(t testing.TB) {
	t.Helper()
	s.stopT(t, true)
}

// Kill stops the server abruptly (SIGKILL): requests in flight are cut
// without a response. Restart brings it back with its data.
func (s *Server) Kill(t testing.TB) {
	t.Helper()
	s.stopT(t, false)
}

func (s *Server) stopT(t testing.TB, graceful bool) {
	t.Helper()
	if s.mode == ModeExternal {
		t.Skipf("miniotest: cannot stop the external server at %s (%s is set); this test needs a server the harness owns", s.Endpoint, EnvEndpoint)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.terminated {
		t.Fatal("miniotest: Stop on a removed server")
	}
	if !s.running {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.b.stop(ctx, graceful); err != nil {
		t.Fatalf("miniotest: stop %s: %v", s.b.id(), err)
	}
	s.running = false
}

// Restart starts a stopped server again on the same endpoint with the same
// data, and waits until it serves requests. Restart of a running server
// stops it first.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if s.mode == ModeExternal {
		t.Skipf("miniotest: cannot restart the external server at %s (%s is set); this test needs a server the harness owns", s.Endpoint, EnvEndpoint)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.terminated {
		t.Fatal("miniotest: Restart on a removed server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout+time.Minute)
	defer cancel()
	if s.running {
		if err := s.b.stop(ctx, true); err != nil {
			t.Fatalf("miniotest: stop %s: %v", s.b.id(), err)
		}
		s.running = false
	}
	if err := s.b.start(ctx); err != nil {
		t.Fatalf("miniotest: restart %s: %v", s.b.id(), err)
	}
	if err := s.waitReady(ctx); err != nil {
		t.Fatal(err)
	}
	s.running = true
}

// terminate removes the server and everything it owns; it is idempotent.
func (s *Server) terminate(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.terminated || s.b == nil {
		return nil
	}
	if err := s.b.terminate(ctx); err != nil {
		return err
	}
	s.terminated = true
	s.running = false
	return nil
}

// S3Client returns an S3 client for the server: static credentials, path
// style addressing, and the standard retryer without its client-side
// retry token bucket (which drains when a test stops the server and then
// refuses to retry at all).
func (s *Server) S3Client(t testing.TB) *s3.Client {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client == nil {
		s.client = s.newClient()
	}
	return s.client
}

func (s *Server) newClient() *s3.Client {
	cfg := aws.Config{
		Region:      s.Region,
		Credentials: credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
		Retryer: func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) { o.RateLimiter = ratelimit.None })
		},
	}
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(s.Endpoint)
		o.UsePathStyle = true
	})
}

// waitReady polls until the server answers its readiness probe and an
// authenticated ListBuckets, or fails with the server's log when it dies or
// the deadline passes. The health probe alone is not enough: it can answer
// before the credentials and object layer are initialised.
func (s *Server) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	client := s.newClient()
	hc := &http.Client{Timeout: 2 * time.Second}
	var last error
	for {
		last = s.probe(ctx, hc, client)
		if last == nil {
			return nil
		}
		if err := s.b.exited(ctx); err != nil {
			return fmt.Errorf("miniotest: %s died before it was ready: %v\n--- server output ---\n%s", s.b.id(), err, s.b.logs(context.Background()))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("miniotest: %s not ready at %s after %v: %v\n--- server output ---\n%s", s.b.id(), s.Endpoint, readyTimeout, last, s.b.logs(context.Background()))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (s *Server) probe(ctx context.Context, hc *http.Client, client *s3.Client) error {
	if s.kind.healthPath != "" {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.Endpoint+s.kind.healthPath, nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", s.kind.healthPath, resp.Status)
		}
	}
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := client.ListBuckets(lctx, &s3.ListBucketsInput{}, func(o *s3.Options) {
		o.RetryMaxAttempts = 1 // the caller's loop retries
	})
	if err != nil || s.kind.ready == nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return s.kind.ready(rctx, client)
}

// binaryPath finds the minio binary: TIDEMARK_MINIO_BIN, else the cache path
// install-minio.sh installs to.
func binaryPath() (string, error) {
	if p := os.Getenv(EnvBin); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%w: %s=%s: %v; %s", errNoMinio, EnvBin, p, err, installHint)
		}
		return p, nil
	}
	p := cachedBinary()
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%w: no binary at %s; %s", errNoMinio, p, installHint)
	}
	// The cache holds what install-minio.sh installed; a binary of another
	// version there is stale (TIDEMARK_MINIO_BIN is for deliberate others).
	if v, err := binaryVersion(p); err != nil || v != MinioVersion {
		return "", fmt.Errorf("%w: %s is version %q, want %s; %s", errNoMinio, p, v, MinioVersion, installHint)
	}
	return p, nil
}

func cacheDir() string {
	if d := os.Getenv(EnvCache); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "tidemark-cache")
	}
	return filepath.Join(home, ".cache", "tidemark")
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
