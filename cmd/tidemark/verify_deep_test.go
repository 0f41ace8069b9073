package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/integration/miniotest"
)

// TestVerifyDeepAndScrubOnMinIONameEveryDamagedKey runs the demo on
// MinIO, then damages two of the latest checkpoint's objects behind
// Tidemark's back, with the S3 API: one overwritten with other bytes, one
// deleted. verify --deep and scrub must name both keys and exit 3; a
// stray object shows as an orphan; before the damage both are OK.
func TestVerifyDeepAndScrubOnMinIONameEveryDamagedKey(t *testing.T) {
	const prefix = "wordcount"
	store := s3URL(t, prefix)
	must(t, "", demoArgs(t.TempDir(), store)...)
	must(t, store, "savepoint", "create", "v1")
	out := must(t, store, "verify", "--deep", "latest-completed")
	if !strings.Contains(out, ": OK, ") {
		t.Fatalf("verify --deep of an intact checkpoint: %q", out)
	}
	must(t, store, "verify", "--deep", "v1")
	// The demo's GC leaves the shared files of dropped checkpoints for
	// its grace period: orphans, which are not damage.
	var before scrubJSON
	mustJSON(t, store, &before, "scrub")
	if !before.OK {
		t.Fatalf("scrub of an intact store: %+v", before.ScrubReport)
	}

	var show struct {
		ID    string                           `json:"id"`
		Files map[string][]blobstorage.FileRef `json:"files"`
	}
	mustJSON(t, store, &show, "show", "latest-completed")
	var refs []blobstorage.FileRef
	for _, files := range show.Files {
		refs = append(refs, files...)
	}
	if len(refs) < 2 {
		t.Fatalf("latest checkpoint has %d files, want at least 2", len(refs))
	}
	// Other bytes of the same length: only the SHA-256 can tell.
	corrupt, missing, size := refs[0].Key, refs[1].Key, refs[0].Size
	// The bucket is the one s3URL made: the first path segment.
	bucket := strings.SplitN(strings.TrimPrefix(store, "s3://"), "/", 2)[0]
	client := miniotest.Shared(t).S3Client(t)
	ctx := t.Context()
	if _, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String(prefix + "/" + corrupt), Body: bytes.NewReader(bytes.Repeat([]byte("x"), int(size)))}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &bucket, Key: aws.String(prefix + "/" + missing)}); err != nil {
		t.Fatal(err)
	}
	stray := "shared/counts/ckpt-00000000000000000099-e1/000099.sst"
	if _, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String(prefix + "/" + stray), Body: bytes.NewReader([]byte("stray"))}); err != nil {
		t.Fatal(err)
	}

	out, errOut, code := tm(t, store, "verify", "--deep", "latest-completed")
	t.Logf("tidemark verify --deep latest-completed (exit %d):\n%s", code, out)
	if code != exitVerify || !strings.Contains(out, "FAILED: 2 of") || !strings.Contains(out, "sha256") ||
		!strings.Contains(out, "corrupt "+corrupt) || !strings.Contains(out, "missing "+missing) {
		t.Fatalf("verify --deep: exit %d, want 3 naming corrupt %s and missing %s\nstdout: %s\nstderr: %s", code, corrupt, missing, out, errOut)
	}
	var v deepResult
	out, _, code = tm(t, store, "verify", "--deep", "latest-completed", "--output", "json")
	if err := json.Unmarshal([]byte(out), &v); err != nil || code != exitVerify || v.OK || len(v.Damaged) != 2 {
		t.Fatalf("verify --deep --output json: exit %d, %+v, %v\n%s", code, v, err, out)
	}

	out, errOut, code = tm(t, store, "scrub")
	t.Logf("tidemark scrub (exit %d):\n%s", code, out)
	if code != exitVerify || !strings.Contains(out, corrupt) || !strings.Contains(out, missing) ||
		!strings.Contains(out, fmt.Sprintf("orphans: %s", plural(len(before.Orphans)+1, "object"))) || !strings.Contains(out, "  "+stray+"  ") {
		t.Fatalf("scrub: exit %d, want 3 naming %s, %s and the orphan %s\nstdout: %s\nstderr: %s", code, corrupt, missing, stray, out, errOut)
	}
}

// A read the store's own checksum failed is damage: exit 3, like a
// digest that does not match the record.
func TestAChecksumMismatchIsExitThree(t *testing.T) {
	err := fmt.Errorf("savepoint: read: %w", blobstore.ErrChecksum)
	if got := exitCode(t.Context(), err); got != exitVerify {
		t.Fatalf("exit %d for %v, want %d", got, err, exitVerify)
	}
}
