package miniotest

import (
	"context"
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// SeaweedFSVersion is the pinned version of github.com/seaweedfs/seaweedfs,
// the third S3 implementation the tests run on (its S3 gateway).
// scripts/install-seaweedfs.sh installs the same version (a test checks
// that the two agree).
const SeaweedFSVersion = "v0.0.0-20261109003541-7506e5f91cd6"

// SeaweedFSImageRepository is the local repository of the SeaweedFS
// images; the tag is SeaweedFSVersion.
const SeaweedFSImageRepository = "tidemark-seaweedfs"

const (
	seaweedModule = "github.com/seaweedfs/seaweedfs"
	envSeaweedBin = "TIDEMARK_SEAWEEDFS_BIN" // path of the weed binary

	seaweedHint = "install SeaweedFS with scripts/install-seaweedfs.sh (builds " +
		seaweedModule + "/weed@" + SeaweedFSVersion + " into $TIDEMARK_CACHE/bin/weed), or set " +
		envSeaweedBin + " to a weed binary"

	// seaweedS3Port is the S3 port inside the image (weed's default).
	seaweedS3Port = "8333"
)

// seaweedEnv tunes the master for a test server holding many small
// buckets. Each bucket is a collection of its own, and by default the
// master grows seven volumes for each: a few buckets would take every
// volume slot (weed mini does the same). The allocation hold after a
// fresh start waits for volume servers that do not exist here.
var seaweedEnv = []string{
	"WEED_MASTER_VOLUME_GROWTH_COPY_1=1",
	"WEED_MASTER_VOLUME_GROWTH_ALLOCATION_DEFERRAL=0s",
}

// seaweedContainerEnv is seaweedEnv as a container's environment.
func seaweedContainerEnv() map[string]string {
	env := map[string]string{}
	for _, kv := range seaweedEnv {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	return env
}

// seaweedArgs are the arguments of `weed server` running a master, a
// volume server, a filer and the S3 gateway in one process. Every port
// is explicit: weed derives gRPC ports as port+10000 otherwise, which
// overflows for ephemeral ports. ports holds the master, volume, filer
// and S3 gRPC ports in that order, then the master, volume and filer
// HTTP ports.
func seaweedArgs(ip, bindIP, dataDir, config string, s3Port int, ports [7]int, opts SeaweedFSOptions) []string {
	p := func(n int) string { return strconv.Itoa(n) }
	args := []string{
		// Before the command: glog's flags. Its log files would
		// otherwise go to the system's temporary directory.
		"-logtostderr", "server",
		"-ip=" + ip, "-ip.bind=" + bindIP,
		"-dir=" + dataDir,
		"-master.port=" + p(ports[4]), "-master.port.grpc=" + p(ports[0]),
		"-volume.port=" + p(ports[5]), "-volume.port.grpc=" + p(ports[1]),
		"-filer.port=" + p(ports[6]), "-filer.port.grpc=" + p(ports[2]),
		"-s3", "-s3.port=" + p(s3Port), "-s3.port.grpc=" + p(ports[3]),
		"-s3.config=" + config,
		// Off: the Iceberg and Lance catalogs (two more ports), and
		// the master's usage report to a remote endpoint.
		"-s3.port.iceberg=0", "-s3.port.lance=0",
		"-master.telemetry=false",
		// Small volumes, many slots: one bucket takes at least one.
		"-master.volumeSizeLimitMB=64", "-volume.max=256",
		// A graceful stop must fit in stopGrace, not wait 10 s. A
		// restarted master with raft state of its own waits an election
		// timeout (10 s) before it leads; it is alone, so 1 s will do.
		"-volume.preStopSeconds=0", "-master.electionTimeout=1s",
	}
	if !opts.ConvertBackslash {
		// weed's default stores "a\b" as "a/b": two valid keys, one
		// object (docs/servers.md).
		args = append(args, "-s3.allowBackslashInKey=true")
	}
	return args
}

// SeaweedFSOptions are the variations of a SeaweedFS server.
type SeaweedFSOptions struct {
	// ConvertBackslash runs SeaweedFS's default key handling, which
	// stores '\' in an object key as '/'. The harness otherwise keeps
	// '\' (-s3.allowBackslashInKey), as Tidemark's key rules need.
	ConvertBackslash bool
}

// defaultImagePorts are weed's default ports, used inside a container:
// the gRPC ports of master, volume, filer and S3, then the HTTP ports of
// master, volume and filer (see seaweedArgs).
var defaultImagePorts = [7]int{19333, 18080, 18888, 18333, 9333, 8080, 8888}

// containerArgs are the arguments of weed in a container.
func (o SeaweedFSOptions) containerArgs() []string {
	s3Port, _ := strconv.Atoi(seaweedS3Port)
	return seaweedArgs("127.0.0.1", "0.0.0.0", "/data", "/etc/seaweedfs/s3.json", s3Port, defaultImagePorts, o)
}

// seaweedConfig is the S3 gateway's identity file: the harness's root
// credentials with every action.
func seaweedConfig() ([]byte, error) {
	type credential struct {
		AccessKey string `json:"accessKey"`
		SecretKey string `json:"secretKey"`
	}
	type identity struct {
		Name        string       `json:"name"`
		Credentials []credential `json:"credentials"`
		Actions     []string     `json:"actions"`
	}
	return json.MarshalIndent(map[string][]identity{"identities": {{
		Name:        "tidemark",
		Credentials: []credential{{AccessKey: defaultAccessKey, SecretKey: defaultSecretKey}},
		Actions:     []string{"Admin", "Read", "List", "Tagging", "Write"},
	}}}, "", "  ")
}

// seaweedDockerfile: the static binary, its identity file and a data
// directory in a FROM scratch image, like MinIO's. Inside the container
// every port is weed's default except those turned off; the components
// reach each other on 127.0.0.1 and listen on every interface.
const seaweedDockerfile = `FROM scratch
COPY rootfs/ /
COPY weed /usr/bin/weed
COPY s3.json /etc/seaweedfs/s3.json
LABEL ` + labelHarness + `.version="%s"
ENV HOME=/tmp %s
EXPOSE ` + seaweedS3Port + `
ENTRYPOINT ["/usr/bin/weed"]
CMD %s
`

// seaweedKind is SeaweedFS's S3 gateway in front of one master, one
// volume server and one filer, all in one weed process.
var seaweedKind = newSeaweedKind(SeaweedFSOptions{})

func newSeaweedKind(opts SeaweedFSOptions) *serverKind {
	return &serverKind{
		name:   "seaweedfs",
		binary: seaweedBinary,
		processArgs: func(addr, dataDir, dir string) ([]string, error) {
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			s3Port, err := strconv.Atoi(port)
			if err != nil {
				return nil, err
			}
			var ports [7]int
			if err := freePorts(ports[:]); err != nil {
				return nil, fmt.Errorf("miniotest: choose SeaweedFS's ports: %w", err)
			}
			cfg, err := seaweedConfig()
			if err != nil {
				return nil, err
			}
			config := filepath.Join(dir, "s3.json")
			if err := os.WriteFile(config, cfg, 0o600); err != nil {
				return nil, fmt.Errorf("miniotest: SeaweedFS identity file: %w", err)
			}
			return seaweedArgs(host, host, dataDir, config, s3Port, ports, opts), nil
		},
		leftovers:     seaweedSockets,
		processEnv:    seaweedEnv,
		image:         ensureSeaweedImage,
		containerPort: seaweedS3Port,
		// Given to each container, not only baked into the image: an
		// image of the same tag may be from an older harness.
		containerCmd: opts.containerArgs(),
		containerEnv: seaweedContainerEnv(),
		healthPath:   "/healthz",
		ready:        seaweedReady,
	}
}

// seaweedSockets are the Unix sockets weed makes under /tmp for its gRPC
// ports, whatever its directories: a master stopped by SIGKILL leaves
// its socket there.
func seaweedSockets(argv []string) []string {
	var socks []string
	for _, a := range argv {
		for _, svc := range []string{"master", "volume", "filer", "s3"} {
			if port, ok := strings.CutPrefix(a, "-"+svc+".port.grpc="); ok {
				socks = append(socks, fmt.Sprintf("/tmp/seaweedfs-%s-grpc-%s.sock", svc, port))
			}
		}
	}
	return socks
}

// seaweedReady checks that the gateway stores objects, not only lists
// buckets: the filer and the volume server come up after the gateway
// does, and the first write to a bucket waits for a volume to grow.
func seaweedReady(ctx context.Context, client *s3.Client) error {
	bucket := aws.String("miniotest-ready-" + strconv.FormatInt(time.Now().UnixNano(), 36))
	one := func(o *s3.Options) { o.RetryMaxAttempts = 1 } // the caller's loop retries
	if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: bucket}, one); err != nil {
		return fmt.Errorf("create bucket: %w", err)
	}
	key := aws.String("ready")
	_, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: bucket, Key: key, Body: strings.NewReader("ok")}, one)
	if err == nil {
		_, err = client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: bucket, Key: key}, one)
	}
	if _, derr := client.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: bucket}, one); err == nil && derr != nil {
		err = fmt.Errorf("delete bucket: %w", derr)
	}
	return err
}

// StartSeaweedFS starts a SeaweedFS server (its S3 gateway, on a fresh
// directory) for this test alone, in the mode TIDEMARK_MINIO selects
// (docker or process, as for MinIO), and removes it, by id, in
// t.Cleanup. TIDEMARK_MINIO_ENDPOINT does not apply: it names a MinIO
// server.
func StartSeaweedFS(t testing.TB) *Server {
	t.Helper()
	return startKindT(t, seaweedKind)
}

// StartSeaweedFSWith is StartSeaweedFS with opts.
func StartSeaweedFSWith(t testing.TB, opts SeaweedFSOptions) *Server {
	t.Helper()
	return startKindT(t, newSeaweedKind(opts))
}

// SharedSeaweedFS returns the SeaweedFS server shared by all tests of
// this test binary, like Shared does for MinIO (TestMain must call Main).
func SharedSeaweedFS(t testing.TB) *Server {
	t.Helper()
	return sharedOf(t, seaweedKind)
}

// startKindT starts a server of kind k for this test alone, in the mode
// the environment selects, and removes it in t.Cleanup.
func startKindT(t testing.TB, k *serverKind) *Server {
	t.Helper()
	mode, err := chooseMode(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if mode == ModeDocker {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
		defer cancel()
		s, err := startDocker(ctx, dockerOptions{kind: k})
		if err != nil {
			t.Fatal(err)
		}
		registerCleanup(t, s)
		return s
	}
	dir := t.TempDir()
	s, err := startProcess(t.Context(), k, dir)
	if err != nil {
		t.Fatal(err)
	}
	registerCleanup(t, s)
	return s
}

// seaweedBinary finds the weed binary: TIDEMARK_SEAWEEDFS_BIN, else the
// cache path install-seaweedfs.sh installs to, which must hold the pinned
// version.
func seaweedBinary() (string, error) {
	if p := os.Getenv(envSeaweedBin); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("miniotest: no SeaweedFS: %s=%s: %v; %s", envSeaweedBin, p, err, seaweedHint)
		}
		return p, nil
	}
	p := filepath.Join(cacheDir(), "bin", "weed")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("miniotest: no SeaweedFS at %s; %s", p, seaweedHint)
	}
	if v := depVersion(p, seaweedModule); v != SeaweedFSVersion {
		return "", fmt.Errorf("miniotest: %s is SeaweedFS %q, want %s; %s", p, v, SeaweedFSVersion, seaweedHint)
	}
	return p, nil
}

// depVersion returns the version of module in the build info of the
// binary at path, as its main module (weed's, though it is built from a
// wrapper module: see install-seaweedfs.sh) or a dependency, or "".
func depVersion(path, module string) string {
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return ""
	}
	if info.Main.Path == module {
		return info.Main.Version
	}
	for _, d := range info.Deps {
		if d.Path == module {
			return d.Version
		}
	}
	return ""
}

// freePorts fills ports with distinct free ports of 127.0.0.1, holding
// every listener until all are chosen (see freePort for the race left).
func freePorts(ports []int) error {
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		defer l.Close()
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return nil
}

var seaweedImage struct {
	mu  sync.Mutex
	tag string
}

// ensureSeaweedImage returns the tag of the SeaweedFS image, building it
// from the installed binary when the tag does not exist. The tag is the
// binary's seaweedfs module version, or sha-<digest prefix> for another
// binary.
func ensureSeaweedImage(ctx context.Context) (string, error) {
	seaweedImage.mu.Lock()
	defer seaweedImage.mu.Unlock()
	if seaweedImage.tag != "" {
		return seaweedImage.tag, nil
	}
	cli, err := DockerClient(ctx)
	if err != nil {
		return "", fmt.Errorf("miniotest: Docker is not available: %w", err)
	}
	bin, err := seaweedBinary()
	if err != nil {
		return "", err
	}
	version := depVersion(bin, seaweedModule)
	if version == "" || version == "(devel)" {
		if version, err = binaryVersion(bin); err != nil { // sha-<digest>
			return "", err
		}
	}
	tag := SeaweedFSImageRepository + ":" + tagSafe(version)
	ok, err := imageExists(ctx, cli, tag)
	if err != nil {
		return "", fmt.Errorf("miniotest: inspect image %s: %w", tag, err)
	}
	if !ok {
		start := time.Now()
		dir, err := os.MkdirTemp("", "miniotest-seaweedfs-image-")
		if err != nil {
			return "", err
		}
		defer os.RemoveAll(dir)
		cfg, err := seaweedConfig()
		if err != nil {
			return "", err
		}
		config := filepath.Join(dir, "s3.json")
		if err := os.WriteFile(config, cfg, 0o644); err != nil {
			return "", err
		}
		cmd, err := json.Marshal(SeaweedFSOptions{}.containerArgs())
		if err != nil {
			return "", err
		}
		bctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		defer cancel()
		err = BuildImage(bctx, tag, ImageSpec{
			Dockerfile: fmt.Sprintf(seaweedDockerfile, version, strings.Join(seaweedEnv, " "), cmd),
			Dirs:       map[string]int64{"rootfs/": 0o755, "rootfs/data/": 0o755, "rootfs/etc/": 0o755, "rootfs/tmp/": 0o1777},
			Files:      map[string]string{"weed": bin, "s3.json": config},
			Labels:     map[string]string{labelHarness + ".image": "true"},
		})
		if err != nil {
			return "", err
		}
		fmt.Fprintf(os.Stderr, "miniotest: built image %s from %s in %v\n", tag, bin, time.Since(start).Round(time.Millisecond))
	}
	seaweedImage.tag = tag
	return tag, nil
}
