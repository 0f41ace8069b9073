// Package integration holds Tidemark's end-to-end tests against real parts:
// a real MinIO server (see integration/miniotest), real filesystems and
// real containers. It has no non-test code besides this comment.
package integration
