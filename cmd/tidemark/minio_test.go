package main

import (
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

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

// A store outage shorter than --outage-tolerance does not stop the job:
// MinIO is killed mid-run and restarted seconds later, and the same run
// ends exactly-once, without a restart of the job (finding 5: 19 of 20
// restarts of 0.3-8 s made the job exit at its next write).
func TestDemoRidesThroughAMinIORestart(t *testing.T) {
	mt := miniotest.Start(t)
	bucket := mt.NewBucket(t)
	t.Setenv("AWS_ACCESS_KEY_ID", mt.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", mt.SecretKey)
	t.Setenv("AWS_REGION", mt.Region)
	q := url.Values{"endpoint": {mt.Endpoint}, "path_style": {"true"}}
	store := "s3://" + bucket + "/ride?" + q.Encode()
	type result struct {
		out, errOut string
		code        int
		at          time.Time
	}
	done := make(chan result, 1)
	go func() {
		out, errOut, code := tm(t, "", "demo", "--dir", t.TempDir(), "--store", store, "--records", "20000", "--words", "300",
			"--batch", "500", "--checkpoint-every", "2000", "--interval", "1h", "--slow", "100ms", "--outage-tolerance", "30s")
		done <- result{out, errOut, code, time.Now()}
	}()
	time.Sleep(1500 * time.Millisecond) // a checkpoint or two in
	mt.Kill(t)
	// Longer than the default retry budget of a request (about 8 s).
	time.Sleep(15 * time.Second)
	select {
	case r := <-done:
		t.Fatalf("the demo ended while MinIO was down: exit %d\n%s\n%s", r.code, r.out, r.errOut)
	default:
	}
	mt.Restart(t)
	restarted := time.Now()
	r := <-done
	if r.code != 0 || !strings.Contains(r.out, "exactly-once: OK") {
		t.Fatalf("demo across a MinIO restart: exit %d\nstdout: %s\nstderr: %s", r.code, r.out, r.errOut)
	}
	if !r.at.After(restarted) {
		t.Fatal("the demo ended before MinIO came back: the test proves nothing")
	}
}
