package integration

import (
	"bytes"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
	"github.com/tidemark-io/tidemark/integration/miniotest"
	"github.com/tidemark-io/tidemark/s3store"
)

// TestStoreRidesThroughAMinIORestart kills MinIO, starts writes and reads
// while it is down, and restarts it: with the retry budget set to the
// operation timeout (MaxAttempts -1) every call waits the outage out and
// succeeds, with the right bytes. (Finding 5: 19 of 20 restarts of 0.3-8 s
// made the job exit at its next write with the default budget of 5
// attempts, about 1-2 s.)
func TestStoreRidesThroughAMinIORestart(t *testing.T) {
	mt := miniotest.Start(t)
	srv := s3Server{
		name: "minio", endpoint: mt.Endpoint, accessKey: mt.AccessKey, secretKey: mt.SecretKey,
		newBucket: func(t *testing.T) string { return mt.NewBucket(t) },
	}
	s := srv.store(t, "jobs/j", func(o *s3store.Options) {
		o.PartSize = s3store.MinPartSize
		o.MaxAttempts = -1
		o.MaxBackoff = time.Second
		o.OperationTimeout = 90 * time.Second // covers a cold restart on a busy machine
	})
	ctx := t.Context()
	large := blobstoretest.Payload(21, 2*s3store.MinPartSize+5)
	if err := s.Put(ctx, "before", bytes.NewReader([]byte("written before"))); err != nil {
		t.Fatal(err)
	}
	mt.Kill(t)
	type result struct {
		what string
		err  error
	}
	results := make(chan result, 3)
	go func() { results <- result{"small Put", s.Put(ctx, "during/small", bytes.NewReader([]byte("small")))} }()
	go func() { results <- result{"multipart Put", s.Put(ctx, "during/large", bytes.NewReader(large))} }()
	go func() {
		_, err := s.Stat(ctx, "before")
		results <- result{"Stat", err}
	}()
	time.Sleep(2 * time.Second) // calls are failing and backing off now
	down := time.Now()
	mt.Restart(t)
	t.Logf("MinIO was down for at least %v", time.Since(down)+2*time.Second)
	for range 3 {
		r := <-results
		if r.err != nil {
			t.Errorf("%s across the restart: %v", r.what, r.err)
		}
	}
	if t.Failed() {
		return
	}
	for key, want := range map[string][]byte{"during/small": []byte("small"), "during/large": large} {
		rc, err := s.Get(ctx, key)
		if err != nil {
			t.Fatalf("Get %s: %v", key, err)
		}
		var buf bytes.Buffer
		_, err = buf.ReadFrom(rc)
		rc.Close()
		if err != nil || !bytes.Equal(buf.Bytes(), want) {
			t.Fatalf("%s reads %d bytes (%v), want %d", key, buf.Len(), err, len(want))
		}
	}
}
