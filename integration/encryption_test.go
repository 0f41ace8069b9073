package integration

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/integration/miniotest"
	"github.com/tidemark-io/tidemark/s3store"
)

// sseCase is one server-side encryption setting and what HEAD must show.
type sseCase struct {
	name  string
	sse   string // s3store.Options.SSE
	kmsID string // s3store.Options.SSEKMSKeyID
}

// encryptionCheck HEADs objects and reports those not encrypted as c
// says: ServerSideEncryption as requested and, for SSE-KMS, the key.
type encryptionCheck struct {
	c      sseCase
	client *s3.Client
	bucket string
}

// check HEADs key (and, for an object made of parts, every part with
// ?partNumber) and returns what is wrong, or "".
func (e encryptionCheck) check(ctx context.Context, key string) (parts int, problem string) {
	head := func(part int32) (*s3.HeadObjectOutput, error) {
		in := &s3.HeadObjectInput{Bucket: &e.bucket, Key: &key}
		if part > 0 {
			in.PartNumber = aws.Int32(part)
		}
		return e.client.HeadObject(ctx, in)
	}
	out, err := head(0)
	if err != nil {
		return 0, fmt.Sprintf("HEAD: %v", err)
	}
	if p := e.problem(out); p != "" {
		return 0, p
	}
	if !strings.Contains(aws.ToString(out.ETag), "-") {
		return 0, "" // one PUT: no parts
	}
	first, err := head(1)
	if err != nil {
		return 0, fmt.Sprintf("HEAD part 1: %v", err)
	}
	n := aws.ToInt32(first.PartsCount)
	for p := int32(1); p <= n; p++ {
		out, err := head(p)
		if err != nil {
			return int(n), fmt.Sprintf("HEAD part %d: %v", p, err)
		}
		if prob := e.problem(out); prob != "" {
			return int(n), fmt.Sprintf("part %d: %s", p, prob)
		}
	}
	return int(n), ""
}

func (e encryptionCheck) problem(out *s3.HeadObjectOutput) string {
	if got := string(out.ServerSideEncryption); got != e.c.sse {
		return fmt.Sprintf("x-amz-server-side-encryption %q, want %q", got, e.c.sse)
	}
	if e.c.kmsID != "" && !strings.HasSuffix(aws.ToString(out.SSEKMSKeyId), e.c.kmsID) {
		return fmt.Sprintf("KMS key %q, want %q", aws.ToString(out.SSEKMSKeyId), e.c.kmsID)
	}
	return ""
}

// headAfterWrite is a Blobstore that HEADs every object right after it
// is written, so that objects that do not outlive the run (restore pins)
// are checked too.
type headAfterWrite struct {
	blobstore.Blobstore
	e       encryptionCheck
	mu      sync.Mutex
	written map[string]bool // key → checked
	bad     []string
}

func (h *headAfterWrite) Unwrap() blobstore.Blobstore { return h.Blobstore }

func (h *headAfterWrite) after(ctx context.Context, key string, err error) {
	if err != nil {
		return
	}
	_, p := h.e.check(ctx, key)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.written[key] = true
	if p != "" {
		h.bad = append(h.bad, key+": "+p)
	}
}

func (h *headAfterWrite) Put(ctx context.Context, key string, r io.Reader) error {
	err := h.Blobstore.Put(ctx, key, r)
	h.after(ctx, key, err)
	return err
}

func (h *headAfterWrite) PutIfAbsent(ctx context.Context, key string, r io.Reader) (string, error) {
	etag, err := h.Blobstore.PutIfAbsent(ctx, key, r)
	h.after(ctx, key, err)
	return etag, err
}

func (h *headAfterWrite) PutIfMatch(ctx context.Context, key, etag string, r io.Reader) (string, error) {
	etag, err := h.Blobstore.PutIfMatch(ctx, key, etag, r)
	h.after(ctx, key, err)
	return etag, err
}

// TestEncryptionAppliesToEveryObjectOnMinIO runs a job's storage life on
// MinIO with its built-in KMS, under SSE-S3 and under SSE-KMS: the writer
// role, two checkpoints of a table large enough to go multipart, a
// savepoint (multipart too), a restore (which pins) and a savepoint
// restore. Every object is HEADed right after it is written, and every
// object in the bucket and every part of each multipart object at the
// end: each must be encrypted as configured. (s3store's upload records
// get the same SSE fields but are deleted before the end.) A
// plain object put in the bucket beside them must be reported, which
// shows the check can fail.
func TestEncryptionAppliesToEveryObjectOnMinIO(t *testing.T) {
	srv := miniotest.StartWithKMS(t)
	client := srv.S3Client(t)
	for _, c := range []sseCase{
		{name: "SSE-S3", sse: "AES256"},
		{name: "SSE-KMS", sse: "aws:kms", kmsID: miniotest.KMSKeyName},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := t.Context()
			bucket := srv.NewBucket(t)
			store, err := s3store.New(ctx, s3store.Options{
				Bucket: bucket, Region: srv.Region, Endpoint: srv.Endpoint, PathStyle: true,
				AccessKey: srv.AccessKey, SecretKey: srv.SecretKey,
				PartSize: s3store.MinPartSize, SSE: c.sse, SSEKMSKeyID: c.kmsID,
			})
			if err != nil {
				t.Fatal(err)
			}
			e := encryptionCheck{c: c, client: client, bucket: bucket}
			bs := &headAfterWrite{Blobstore: store, e: e, written: map[string]bool{}}

			st := blobstorage.New(bs, t.TempDir(), blobstorage.Options{})
			if _, err := st.Acquire(ctx); err != nil {
				t.Fatal(err)
			}
			table := make([]byte, 2*s3store.MinPartSize+4096) // three parts
			for i, id := range []string{checkpoint.NewID(1), checkpoint.NewID(2)} {
				_, _ = rand.Read(table)
				dir := filepath.Join(st.StateDir(id), "op")
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				for name, data := range map[string][]byte{fmt.Sprintf("%06d.sst", i+1): table, "MANIFEST-000001": []byte("manifest " + id)} {
					if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				d := &checkpoint.CheckpointData{ID: id, Timestamp: time.Now().UTC(), Status: checkpoint.StatusCompleted,
					Operators: map[string][]byte{"0": []byte("op")}, StateDirs: map[string]string{"op": "op"}}
				if err := st.Save(ctx, d); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := checkpoint.CreateSavepoint(ctx, st, bs, "sp"); err != nil {
				t.Fatal(err)
			}
			if err := blobstorage.New(bs, t.TempDir(), blobstorage.Options{}).Restore(ctx, checkpoint.NewID(2)); err != nil {
				t.Fatal(err)
			}
			dst := blobstorage.New(bs, t.TempDir(), blobstorage.Options{})
			if _, err := dst.Acquire(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := checkpoint.RestoreSavepoint(ctx, dst, bs, "sp"); err != nil {
				t.Fatal(err)
			}

			for _, b := range bs.bad {
				t.Errorf("%s: written unencrypted or wrongly encrypted: %s", c.name, b)
			}
			var kinds = map[string]int{}
			for k := range bs.written {
				kinds[blobstorage.KeyClass(k)]++
			}
			for _, want := range []string{"record", "pointer", "writer", "mark", "pin", "shared", "private", "savepoint"} {
				if kinds[want] == 0 {
					t.Errorf("no %s object was written: the run does not cover it (written: %v)", want, kinds)
				}
			}

			// Everything the bucket holds at the end, parts included.
			objects, multipart := 0, 0
			pages := s3.NewListObjectsV2Paginator(client, &s3.ListObjectsV2Input{Bucket: &bucket})
			for pages.HasMorePages() {
				page, err := pages.NextPage(ctx)
				if err != nil {
					t.Fatal(err)
				}
				for _, o := range page.Contents {
					objects++
					parts, p := e.check(ctx, aws.ToString(o.Key))
					if parts > 0 {
						multipart++
					}
					if p != "" {
						t.Errorf("%s: %s", aws.ToString(o.Key), p)
					}
				}
			}
			if multipart < 2 {
				t.Errorf("%d multipart objects, want the tables and the savepoint", multipart)
			}
			t.Logf("%s: %d objects written and HEADed after each write (%v); %d objects in the bucket at the end, %d of them multipart with every part HEADed: all %s",
				c.name, len(bs.written), kinds, objects, multipart, describe(c))

			// The control: an object without encryption is reported.
			plain := "control/plain"
			if _, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: &plain, Body: strings.NewReader("x"),
				ServerSideEncryption: types.ServerSideEncryption("")}); err != nil {
				t.Fatal(err)
			}
			if _, p := e.check(ctx, plain); p == "" {
				t.Errorf("the check passed an object written without encryption")
			}
		})
	}
}

func describe(c sseCase) string {
	if c.kmsID != "" {
		return c.sse + " with key " + c.kmsID
	}
	return c.sse
}
