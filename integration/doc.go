// Package integration holds Tidemark's end-to-end tests against real parts:
// a real MinIO server (see integration/miniotest), real filesystems and
// real containers. Its subpackages hold the harness: miniotest starts a
// real MinIO, faultproxy injects network faults between client and server.
package integration
