package miniotest

import (
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/testcontainers/testcontainers-go"
)

// ImageRepository is the local repository of the MinIO images EnsureImage
// builds; the tag is the MinIO module version of the binary inside.
const ImageRepository = "tidemark-minio"

const minioModule = "github.com/minio/minio"

// dockerfile describes an image with nothing but the static MinIO binary and
// the two directories it writes to: scratch has no shell and no mkdir, so
// the directories come from the build context (rootfs/), with /tmp
// world-writable as usual. HOME=/tmp because MinIO looks for its config and
// certs under the home directory, and scratch has no /etc/passwd.
const dockerfile = `FROM scratch
COPY rootfs/ /
COPY minio /usr/bin/minio
LABEL ` + labelHarness + `.version="%s"
ENV HOME=/tmp MINIO_BROWSER=off MINIO_UPDATE=off MINIO_CI_CD=1
EXPOSE 9000
ENTRYPOINT ["/usr/bin/minio"]
CMD ["server", "/data", "--address", ":9000", "--certs-dir", "/tmp/certs", "--quiet"]
`

// image caches the tag EnsureImage settled on, per test binary.
var image struct {
	mu  sync.Mutex
	tag string // set once an image is known to exist
}

// EnsureImage returns the tag of a local Docker image running the MinIO
// binary (see the package documentation for where the binary comes from),
// building it when the tag does not exist yet. The tag is
// tidemark-minio:<module version> for a binary built from the MinIO module,
// and tidemark-minio:sha-<digest prefix> for any other binary, so that an
// image is reused exactly while it holds the same server.
//
// When no binary is installed but the image of the pinned MinioVersion
// exists, that image is used.
func EnsureImage(ctx context.Context) (string, error) {
	image.mu.Lock()
	defer image.mu.Unlock()
	if image.tag != "" {
		return image.tag, nil
	}
	cli, err := DockerClient(ctx)
	if err != nil {
		return "", fmt.Errorf("miniotest: Docker is not available: %w", err)
	}
	bin, binErr := binaryPath()
	if binErr != nil {
		pinned := ImageRepository + ":" + MinioVersion
		if ok, err := imageExists(ctx, cli, pinned); err == nil && ok {
			image.tag = pinned
			return pinned, nil
		}
		return "", binErr
	}
	version, err := binaryVersion(bin)
	if err != nil {
		return "", err
	}
	tag := ImageRepository + ":" + tagSafe(version)
	ok, err := imageExists(ctx, cli, tag)
	if err != nil {
		return "", fmt.Errorf("miniotest: inspect image %s: %w", tag, err)
	}
	if !ok {
		if err := buildImage(ctx, bin, version, tag); err != nil {
			return "", err
		}
	}
	image.tag = tag
	return tag, nil
}

func imageExists(ctx context.Context, cli *testcontainers.DockerClient, tag string) (bool, error) {
	_, err := cli.ImageInspect(ctx, tag)
	if cerrdefs.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// binaryVersion returns the MinIO module version recorded in the binary's
// build info, or "sha-<12 hex>" of its content when it has none (a binary
// built some other way).
func binaryVersion(bin string) (string, error) {
	if info, err := buildinfo.ReadFile(bin); err == nil {
		if info.Main.Path == minioModule && info.Main.Version != "" && info.Main.Version != "(devel)" {
			return info.Main.Version, nil
		}
	}
	f, err := os.Open(bin)
	if err != nil {
		return "", fmt.Errorf("miniotest: read %s: %w", bin, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("miniotest: read %s: %w", bin, err)
	}
	return "sha-" + hex.EncodeToString(h.Sum(nil))[:12], nil
}

// tagSafe maps a version onto Docker's tag alphabet [A-Za-z0-9_.-]
// ("+incompatible" has a plus).
func tagSafe(v string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '.', r == '-':
			return r
		}
		return '_'
	}, v)
}

// buildImage builds tag from the binary, with the directories MinIO
// writes to: /data for the objects and a world-writable /tmp.
func buildImage(ctx context.Context, bin, version, tag string) error {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	err := BuildImage(ctx, tag, ImageSpec{
		Dockerfile: fmt.Sprintf(dockerfile, version),
		Dirs:       map[string]int64{"rootfs/": 0o755, "rootfs/data/": 0o755, "rootfs/tmp/": 0o1777},
		Files:      map[string]string{"minio": bin},
		Labels:     map[string]string{labelHarness + ".image": "true"},
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "miniotest: built image %s from %s in %v\n", tag, bin, time.Since(start).Round(time.Millisecond))
	return nil
}

// cachedBinary is the path install-minio.sh installs to.
func cachedBinary() string { return filepath.Join(cacheDir(), "bin", "minio") }
