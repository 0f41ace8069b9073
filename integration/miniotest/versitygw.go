package miniotest

import (
	"context"
	"debug/buildinfo"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// VersityVersion is the pinned version of github.com/versity/versitygw, the
// second S3 implementation the tests run on. scripts/install-versitygw.sh
// installs the same version (a test checks that the two agree).
const VersityVersion = "v1.8.0"

// VersityImageRepository is the local repository of the versitygw images;
// the tag is VersityVersion.
const VersityImageRepository = "tidemark-versitygw"

const (
	versityModule = "github.com/versity/versitygw"
	envVersityBin = "TIDEMARK_VERSITYGW_BIN" // path of the versitygw binary

	versityHint = "install versitygw with scripts/install-versitygw.sh (builds " +
		versityModule + "/cmd/versitygw@" + VersityVersion + " into $TIDEMARK_CACHE/bin/versitygw), or set " +
		envVersityBin + " to a versitygw binary"
)

// versityDockerfile: the static binary and the directory it serves, in a
// FROM scratch image like MinIO's. The posix backend keeps object metadata
// (ETags, user metadata) in extended attributes of the files; the sidecar
// directory keeps it in files instead, which works on any filesystem the
// container's writable layer may be on.
const versityDockerfile = `FROM scratch
COPY rootfs/ /
COPY versitygw /usr/bin/versitygw
LABEL ` + labelHarness + `.version="%s"
ENV HOME=/tmp
EXPOSE 7070
ENTRYPOINT ["/usr/bin/versitygw"]
CMD ["--port", ":7070", "posix", "--sidecar", "/meta", "/data"]
`

// versityKind is the versitygw gateway on its posix backend: every bucket
// is a directory under the data directory.
var versityKind = &serverKind{
	name:   "versitygw",
	binary: versityBinary,
	// A process keeps metadata in extended attributes, versitygw's
	// default (the host's filesystem has them).
	processArgs: func(addr, dataDir, dir string) ([]string, error) {
		return []string{"--port", addr, "posix", dataDir}, nil
	},
	processEnv: []string{
		"ROOT_ACCESS_KEY=" + defaultAccessKey,
		"ROOT_SECRET_KEY=" + defaultSecretKey,
		"VGW_REGION=" + Region,
	},
	image:         ensureVersityImage,
	containerPort: "7070",
	containerEnv: map[string]string{
		"ROOT_ACCESS_KEY": defaultAccessKey,
		"ROOT_SECRET_KEY": defaultSecretKey,
		"VGW_REGION":      Region,
	},
}

// Kind reports what server s is: "minio", "versitygw" or "seaweedfs".
func (s *Server) Kind() string { return s.kind.name }

// StartVersity starts a versitygw server (posix backend on a fresh
// directory) for this test alone, in the mode TIDEMARK_MINIO selects
// (docker or process, as for MinIO), and removes it, by id, in t.Cleanup.
// TIDEMARK_MINIO_ENDPOINT does not apply: it names a MinIO server.
func StartVersity(t testing.TB) *Server {
	t.Helper()
	return startKindT(t, versityKind)
}

// SharedVersity returns the versitygw server shared by all tests of this
// test binary, like Shared does for MinIO (TestMain must call Main).
func SharedVersity(t testing.TB) *Server {
	t.Helper()
	return sharedOf(t, versityKind)
}

// versityBinary finds the versitygw binary: TIDEMARK_VERSITYGW_BIN, else
// the cache path install-versitygw.sh installs to, which must hold the
// pinned version.
func versityBinary() (string, error) {
	if p := os.Getenv(envVersityBin); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("miniotest: no versitygw: %s=%s: %v; %s", envVersityBin, p, err, versityHint)
		}
		return p, nil
	}
	p := filepath.Join(cacheDir(), "bin", "versitygw")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("miniotest: no versitygw at %s; %s", p, versityHint)
	}
	if v := moduleVersion(p, versityModule); v != VersityVersion {
		return "", fmt.Errorf("miniotest: %s is version %q, want %s; %s", p, v, VersityVersion, versityHint)
	}
	return p, nil
}

// moduleVersion returns the version of module recorded as the main module
// of the binary at path, or "".
func moduleVersion(path, module string) string {
	info, err := buildinfo.ReadFile(path)
	if err != nil || info.Main.Path != module {
		return ""
	}
	return info.Main.Version
}

var versityImage struct {
	mu  sync.Mutex
	tag string
}

// ensureVersityImage returns the tag of the versitygw image, building it
// from the installed binary when the tag does not exist. The tag is the
// binary's module version, or sha-<digest prefix> for another binary.
func ensureVersityImage(ctx context.Context) (string, error) {
	versityImage.mu.Lock()
	defer versityImage.mu.Unlock()
	if versityImage.tag != "" {
		return versityImage.tag, nil
	}
	cli, err := DockerClient(ctx)
	if err != nil {
		return "", fmt.Errorf("miniotest: Docker is not available: %w", err)
	}
	bin, err := versityBinary()
	if err != nil {
		return "", err
	}
	version := moduleVersion(bin, versityModule)
	if version == "" || version == "(devel)" {
		if version, err = binaryVersion(bin); err != nil { // sha-<digest>
			return "", err
		}
	}
	tag := VersityImageRepository + ":" + tagSafe(version)
	ok, err := imageExists(ctx, cli, tag)
	if err != nil {
		return "", fmt.Errorf("miniotest: inspect image %s: %w", tag, err)
	}
	if !ok {
		start := time.Now()
		bctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		defer cancel()
		err := BuildImage(bctx, tag, ImageSpec{
			Dockerfile: fmt.Sprintf(versityDockerfile, version),
			Dirs:       map[string]int64{"rootfs/": 0o755, "rootfs/data/": 0o755, "rootfs/meta/": 0o755, "rootfs/tmp/": 0o1777},
			Files:      map[string]string{"versitygw": bin},
			Labels:     map[string]string{labelHarness + ".image": "true"},
		})
		if err != nil {
			return "", err
		}
		fmt.Fprintf(os.Stderr, "miniotest: built image %s from %s in %v\n", tag, bin, time.Since(start).Round(time.Millisecond))
	}
	versityImage.tag = tag
	return tag, nil
}
