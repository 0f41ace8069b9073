package integration

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/integration/faultproxy"
	"github.com/tidemark-io/tidemark/integration/miniotest"
	"github.com/tidemark-io/tidemark/job"
	"github.com/tidemark-io/tidemark/s3store"
	"github.com/tidemark-io/tidemark/state"
)

// A job whose store stops answering mid-stream (every connection, open
// or new, black-holed) fails after about one operation timeout, not two:
// the sink's abort after the failure has a short deadline of its own. The
// error names the endpoint and what stalled. Issue 23 found 93 s with a
// 45 s timeout: a failed stage of 49 s, then an abort waiting 45 s more.
func TestJobOnAStalledStoreFailsAfterAboutOneOperationTimeout(t *testing.T) {
	const opTimeout = 30 * time.Second
	srv := miniotest.Shared(t)
	bucket := srv.NewBucket(t)
	p := faultproxy.New(t, srv.Endpoint)
	bs := proxiedStore(t, srv, bucket, p.URL(), func(o *s3store.Options) { o.OperationTimeout = opTimeout })
	disk := t.TempDir()
	src := &jobNumbers{n: 1 << 30, batch: 7}
	var (
		once    sync.Once
		stalled time.Time
	)
	cfg := job.Config{
		Storage: blobstorage.New(bs, disk+"/checkpoints", blobstorage.Options{}), Dir: disk,
		Source: src, Processor: src, Sink: job.NewBlobSink(bs, "out/"), EveryRecords: 200,
		State: state.Options{MemTableSize: 256 << 10, CacheSize: 1 << 20},
		Observe: func(e job.Event) {
			if e.Records >= 600 {
				once.Do(func() {
					stalled = time.Now()
					p.Blackhole(true)
				})
			}
		},
	}
	_, err := job.Run(t.Context(), cfg)
	took := time.Since(stalled)
	p.Blackhole(false)
	if stalled.IsZero() {
		t.Fatalf("the job ended before the store stalled: %v", err)
	}
	t.Logf("the job failed %v after the store stalled: %v", took.Round(100*time.Millisecond), err)
	if err == nil {
		t.Fatal("the job ran on through a store that stopped answering")
	}
	if !errors.Is(err, s3store.ErrTimeout) {
		t.Errorf("error does not wrap s3store.ErrTimeout: %v", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, p.Addr()) {
		t.Errorf("error does not name the endpoint %s: %v", p.Addr(), err)
	}
	if !strings.Contains(msg, `s3store: `) || !strings.Contains(msg, `"`) {
		t.Errorf("error does not name the operation and key that stalled: %v", err)
	}
	// One timeout, the abort's short deadline and the time to notice: a
	// second full timeout would be 60 s or more.
	if limit := opTimeout * 3 / 2; took > limit {
		t.Errorf("the job failed %v after the store stalled, over %v with a %v operation timeout", took, limit, opTimeout)
	}
	if st := p.Stats(); st.Accepted == 0 {
		t.Fatalf("no connection went through the proxy: %+v", st)
	}
}
