package integration

import (
	"testing"

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

// versitygwServer is the second S3 implementation of DESIGN.md, started
// by the same harness as MinIO (miniotest.SharedVersity).
func versitygwServer(t *testing.T) s3Server {
	t.Helper()
	srv := miniotest.SharedVersity(t)
	return s3Server{
		name: "versitygw", endpoint: srv.Endpoint, accessKey: srv.AccessKey, secretKey: srv.SecretKey,
		newBucket: func(t *testing.T) string { return srv.NewBucket(t) },
	}
}

// seaweedfsServer is the third S3 implementation, SeaweedFS's S3 gateway
// (miniotest.SharedSeaweedFS).
func seaweedfsServer(t *testing.T) s3Server {
	t.Helper()
	srv := miniotest.SharedSeaweedFS(t)
	return s3Server{
		name: "seaweedfs", endpoint: srv.Endpoint, accessKey: srv.AccessKey, secretKey: srv.SecretKey,
		newBucket: func(t *testing.T) string { return srv.NewBucket(t) },
	}
}
