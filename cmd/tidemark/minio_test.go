package main

import (
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/tidemark-io/tidemark/integration/miniotest"
)

// TestMain shares one MinIO server (container or process, see package
// miniotest) between the tests that need S3, and removes it at the end.
func TestMain(m *testing.M) { os.Exit(miniotest.Main(m)) }

// s3URL returns the store URL of a fresh bucket on the shared MinIO, with
// the credentials in the environment (the AWS chain reads them there).
func s3URL(t *testing.T, prefix string) string {
	t.Helper()
	srv := miniotest.Shared(t)
	bucket := srv.NewBucket(t)
	t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
	t.Setenv("AWS_REGION", srv.Region)
	q := url.Values{"endpoint": {srv.Endpoint}, "path_style": {"true"}}
	return "s3://" + bucket + "/" + prefix + "?" + q.Encode()
}

func TestDemoOnS3ResumesOnAnEmptyNodeAndItsSavepointCopiesToAFileStore(t *testing.T) {
	store := s3URL(t, "wordcount")
	if _, errOut, code := tm(t, "", demoArgs(t.TempDir(), store, "--crash-after-records", "9000")...); code != exitCrashed {
		t.Fatalf("crashing demo on S3: exit %d, want %d\n%s", code, exitCrashed, errOut)
	}
	out, errOut, code := tm(t, "", demoArgs(t.TempDir(), store, "--crash-after-records", "9000")...)
	if code != 0 || !strings.Contains(out, "exactly-once: OK") || !strings.Contains(errOut, "resumed from checkpoint") {
		t.Fatalf("resumed demo on S3: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	must(t, store, "verify", "latest-completed")
	must(t, store, "savepoint", "create", "v1")
	dst := fileURL(t.TempDir())
	must(t, "", "savepoint", "cp", "v1", store, dst)
	must(t, dst, "verify", "v1")
	must(t, dst, "savepoint", "restore", "v1")
	must(t, dst, "verify", "latest-completed")
}
