package job_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstore/memstore"
	"github.com/tidemark-io/tidemark/job"
	"github.com/tidemark-io/tidemark/job/jobtest"
)

// TestWorkersStateModeChange: a workers job killed in local mode resumes
// in remote mode (its local tables migrate as it goes) exactly once; a
// worker in local mode is then refused the checkpoint in remote mode,
// with ErrConfig, before it processes anything.
func TestWorkersStateModeChange(t *testing.T) {
	const n = 800
	bucket := memstore.New()
	sink := job.NewBlobSink(bucket, "out/a/")
	run := func(mode string, g *hub, observe func(job.Event)) (coord, worker *jobtest.Node) {
		coord = jobtest.Go(t, func(ctx context.Context) (job.Result, error) {
			return job.RunCoordinator(ctx, job.CoordinatorConfig{
				Group: g.handle(), Storage: node(t, bucket, t.TempDir()), Slots: []string{"a"},
				Sink:     func(string) (job.Sink, error) { return sink, nil },
				Interval: 20 * time.Millisecond, Timeout: 5 * time.Second, Observe: observe,
			})
		})
		worker = jobtest.Go(t, func(ctx context.Context) (job.Result, error) {
			return job.RunWorker(ctx, job.WorkerConfig{
				Group: g.handle(), Slot: "a", Blobstore: bucket, Dir: t.TempDir(),
				Source:    func(context.Context) (job.Source, error) { return &source{n: n, batch: 10}, nil },
				Processor: summer{owner: "sum-a", pause: 5 * time.Millisecond},
				Sink:      sink, Owners: []string{"sum-a"}, State: smallState, RemoteState: mode,
			})
		})
		return coord, worker
	}
	var completed atomic.Int64
	c, w := run("", newHub(), func(e job.Event) {
		if e.Kind == "checkpoint" {
			completed.Add(1)
		}
	})
	waitUntil(t, func() bool { return completed.Load() >= 2 })
	for _, b := range []*jobtest.Node{c, w} {
		b.Cancel()
		if _, err := b.Wait(t); err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("local run: %v", err) // nil: it ended before the kill
		}
	}
	c, w = run("all", newHub(), nil)
	res, err := c.Wait(t)
	if err != nil || res.Restored == "" {
		t.Fatalf("remote run: %+v, %v", res, err)
	}
	if _, err := w.Wait(t); err != nil {
		t.Fatalf("remote worker: %v", err)
	}
	checkExactlyOnce(t, jobtest.BlobOutput(t, sink), n)

	c, w = run("", newHub(), nil)
	if _, err := w.Wait(t); !errors.Is(err, job.ErrConfig) {
		t.Errorf("local worker on a remote checkpoint: %v, want ErrConfig", err)
	}
	c.Cancel()
	_, _ = c.Wait(t)
}
