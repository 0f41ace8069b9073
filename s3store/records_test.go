package s3store

import (
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
	"github.com/tidemark-io/tidemark/integration/miniotest"
)

// gatedReader yields n bytes, then blocks until release is closed, then
// ends: a Put that is mid-upload when the test chooses.
type gatedReader struct {
	r       io.Reader
	reached chan struct{}
	release chan struct{}
	once    sync.Once
}

func (g *gatedReader) Read(p []byte) (int, error) {
	n, err := g.r.Read(p)
	if err == io.EOF {
		g.once.Do(func() { close(g.reached) })
		<-g.release
	}
	return n, err
}

func TestInterruptedUploadIsAbortedByANewStoreAfterAServerRestart(t *testing.T) {
	// Finding 11: a multipart upload cut by a MinIO restart outlived GC,
	// because after a restart this MinIO lists incomplete uploads only
	// under their exact key. The upload record makes it findable by key
	// and id from any later Store.
	srv := miniotest.Start(t)
	ctx := t.Context()
	opts := func(o *Options) {
		o.Prefix = "jobs/j1"
		o.MaxAttempts = 1
		o.OperationTimeout = 5 * time.Second
	}
	s := newStore(t, srv, opts)
	const key = "savepoints/before-upgrade"
	g := &gatedReader{r: strings.NewReader(string(randomBytes(2*testPartSize+1, 3))), reached: make(chan struct{}), release: make(chan struct{})}
	putErr := make(chan error, 1)
	go func() { putErr <- s.Put(ctx, key, onlyReader{g}) }()
	<-g.reached // parts are being uploaded; the Put waits for the rest
	time.Sleep(500 * time.Millisecond)
	srv.Kill(t)
	close(g.release)
	if err := <-putErr; err == nil {
		t.Fatal("Put succeeded across a server kill")
	}
	srv.Restart(t)

	// A new Store: nothing of the first one's memory.
	s2, err := New(ctx, Options{
		Bucket: s.bucket, Prefix: "jobs/j1", Region: srv.Region, Endpoint: srv.Endpoint, PathStyle: true,
		AccessKey: srv.AccessKey, SecretKey: srv.SecretKey, PartSize: testPartSize,
	})
	if err != nil {
		t.Fatal(err)
	}
	exact := func() []string {
		out, err := srv.S3Client(t).ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{
			Bucket: aws.String(s.bucket), Prefix: aws.String("jobs/j1/" + key),
		})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, u := range out.Uploads {
			ids = append(ids, aws.ToString(u.UploadId))
		}
		return ids
	}
	if len(exact()) == 0 {
		t.Fatal("no incomplete upload under the key after the kill: the test did not interrupt an upload")
	}
	if keys := blobstoretest.ListKeys(t, s2, ""); len(keys) != 0 {
		t.Fatalf("List shows %q; upload records must not be listed", keys)
	}
	if keys, err := s2.IncompleteUploads(ctx, ""); err != nil || len(keys) != 1 || keys[0] != key {
		t.Fatalf("IncompleteUploads = %q, %v; want [%s]", keys, err, key)
	}
	n, err := s2.AbortIncompleteUploads(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("aborted %d uploads, want 1", n)
	}
	if ids := exact(); len(ids) != 0 {
		t.Fatalf("uploads still pending under the exact key: %q", ids)
	}
	raw, err := srv.S3Client(t).ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket)})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range raw.Contents {
		t.Errorf("left in the bucket: %q", aws.ToString(o.Key))
	}
}

func TestUploadRecordsComeAndGo(t *testing.T) {
	// A completed and an aborted multipart upload leave no record; a
	// grace period spares a recorded upload that is still young.
	ctx := t.Context()
	s := newStore(t, miniotest.Shared(t), func(o *Options) { o.Prefix = "p" })
	if err := s.Put(ctx, "big", stream(randomBytes(2*testPartSize+1, 4))); err != nil {
		t.Fatal(err)
	}
	r := io.MultiReader(strings.NewReader(string(randomBytes(2*testPartSize, 5))), iotestErrReader{})
	if err := s.Put(ctx, "failed", onlyReader{r}); !errors.Is(err, errInjectedRead) {
		t.Fatalf("got %v, want the reader's error", err)
	}
	records := func() int {
		out, err := s.client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: aws.String("p/" + recordsDir + "/")})
		if err != nil {
			t.Fatal(err)
		}
		return len(out.Contents)
	}
	if n := records(); n != 0 {
		t.Fatalf("%d upload records left after a completed and an aborted upload", n)
	}
	// A record of an upload in progress (written by hand, as Put does).
	created, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &s.bucket, Key: aws.String("p/young")})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.recordUpload(ctx, "p/young", newWriteID(), aws.ToString(created.UploadId), time.Now()); err != nil {
		t.Fatal(err)
	}
	if n, err := s.AbortIncompleteUploads(ctx, "", time.Hour); err != nil || n != 0 {
		t.Fatalf("AbortIncompleteUploads with a grace period of an hour = %d, %v; want 0, nil", n, err)
	}
	if n := records(); n != 1 {
		t.Fatalf("%d records; the young upload's record must stay", n)
	}
	if n, err := s.AbortIncompleteUploads(ctx, "you", 0); err != nil || n != 1 {
		t.Fatalf("AbortIncompleteUploads(\"you\", 0) = %d, %v; want 1", n, err)
	}
	if n := records(); n != 0 {
		t.Fatalf("%d records after the abort", n)
	}
}
