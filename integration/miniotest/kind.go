package miniotest

import (
	"context"
	"path/filepath"

	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// serverKind is what differs between the S3 servers the harness runs:
// how to find the binary, how to start it as a process or a container,
// and how to tell it is ready.
type serverKind struct {
	name string // "minio", "versitygw", "seaweedfs"
	// binary finds the server's binary (installed under $TIDEMARK_CACHE/bin).
	binary func() (string, error)
	// processArgs are the arguments of a process listening on addr
	// (host:port) with its objects in dataDir; dir is the server's
	// private directory, dataDir's parent, where it may write files of its
	// own (a config file, say).
	processArgs func(addr, dataDir, dir string) ([]string, error)
	// leftovers, when set, names the files outside dir that a process
	// run with argv leaves behind, removed once it is stopped for good.
	leftovers func(argv []string) []string
	// processEnv is added to the test binary's environment.
	processEnv []string
	// image returns the tag of the server's image, building it if needed.
	image func(ctx context.Context) (string, error)
	// containerPort is the S3 port inside the image ("9000").
	containerPort string
	// containerCmd, when set, replaces the image's CMD (a variant of
	// the server the image runs by default).
	containerCmd []string
	// containerEnv is the environment of a container.
	containerEnv map[string]string
	// healthPath is an unauthenticated readiness URL path, or "" when the
	// server has none (an authenticated ListBuckets is always checked).
	healthPath string
	// ready, when set, is a further readiness check after ListBuckets:
	// for a server that lists buckets before it can store objects.
	ready func(ctx context.Context, client *s3.Client) error
}

// minioKind is the MinIO server.
var minioKind = &serverKind{
	name:   "minio",
	binary: binaryPath,
	processArgs: func(addr, dataDir, dir string) ([]string, error) {
		return []string{"server", dataDir, "--address", addr, "--certs-dir", filepath.Join(dir, "certs"), "--quiet"}, nil
	},
	processEnv: []string{
		"MINIO_ROOT_USER=" + defaultAccessKey,
		"MINIO_ROOT_PASSWORD=" + defaultSecretKey,
		"MINIO_BROWSER=off", // no console: one port less, faster start
		"MINIO_UPDATE=off",
	},
	image:         EnsureImage,
	containerPort: "9000",
	containerEnv: map[string]string{
		"MINIO_ROOT_USER":     defaultAccessKey,
		"MINIO_ROOT_PASSWORD": defaultSecretKey,
	},
	healthPath: "/minio/health/ready",
}
