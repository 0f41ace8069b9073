package job_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore/memstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/job"
	"github.com/tidemark-io/tidemark/job/jobtest"
)

// Ten restarts at random points — a kill (ctx cancelled after a random
// number of records, wherever the run is) or a crash after a random
// protocol step — alternating at random between the same disk and an
// empty one, then a run to the end: exactly once.
func TestRandomRestartsExactlyOnce(t *testing.T) {
	const n, restarts = 1500, 10
	for _, shape := range []string{"blobstorage", "filestorage"} {
		t.Run(shape, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(19, 2))
			bucket := memstore.New()
			l := newLedger()
			disk, fileDir := t.TempDir(), filepath.Join(t.TempDir(), "checkpoints")
			cfg := func() job.Config {
				c := job.Config{
					Dir: disk, Source: &source{n: n, batch: 1 + rng.IntN(9)},
					Processor: summer{}, EveryRecords: uint64(20 + rng.IntN(60)), State: smallState,
				}
				if shape == "blobstorage" {
					c.Storage, c.Sink = node(t, bucket, disk), job.NewBlobSink(bucket, "out/")
				} else {
					// One disk is the whole job: only same-disk restarts.
					c.Storage, c.Sink = checkpoint.NewFileStorage(fileDir), l.sink()
				}
				return c
			}
			for i := range restarts {
				where := "same disk"
				if shape == "blobstorage" && rng.IntN(2) == 0 {
					disk, where = t.TempDir(), "empty disk" // the node died with its disk
				}
				c := cfg()
				ctx, kill := context.WithCancel(t.Context())
				how := ""
				if rng.IntN(2) == 0 {
					at := uint64(30 + rng.IntN(200))
					how = fmt.Sprintf("killed after %d records", at)
					c.Observe = func(e job.Event) {
						if e.Records >= at {
							kill()
						}
					}
				} else {
					step := checkpoint.Steps[rng.IntN(len(checkpoint.Steps))]
					nth := int32(1 + rng.IntN(3))
					how = fmt.Sprintf("crashed after %s #%d", step, nth)
					c = job.WithHook(c, crashAt(step, nth, checkpoint.HookHalt))
				}
				res, err := job.Run(ctx, c)
				kill()
				t.Logf("run %d (%s, %s): restored %q, %d checkpoints: %v", i, where, how, res.Restored, res.Checkpoints, err)
			}
			if _, err := job.Run(t.Context(), cfg()); err != nil {
				t.Fatalf("last run: %v", err)
			}
			if shape == "blobstorage" {
				checkExactlyOnce(t, jobtest.BlobOutput(t, job.NewBlobSink(bucket, "out/")), n)
				checkSwept(t, bucket)
			} else {
				checkExactlyOnce(t, l.output(), n)
			}
		})
	}
}

// A job whose runs each die after two checkpoints (a crash loop, or short
// runs) still collects what its earlier runs left: GC runs after a run's
// first checkpoint, not only every GCEvery, so the store keeps about
// Keep completed checkpoints however many runs there were.
func TestShortRunsStillCollect(t *testing.T) {
	const runs, keep = 12, 2
	bucket := memstore.New()
	disk := t.TempDir()
	src := &source{n: 1 << 30, batch: 10}
	for range runs {
		ctx, kill := context.WithCancel(t.Context())
		checkpoints := 0
		c := job.Config{
			Dir: disk, Source: src, Processor: summer{}, EveryRecords: 50, State: smallState,
			Storage: blobstorage.New(bucket, filepath.Join(disk, "checkpoints"), blobstorage.Options{Keep: keep}),
			Sink:    job.NewBlobSink(bucket, "out/"),
			Observe: func(e job.Event) {
				if e.Kind == job.EventCheckpoint {
					if checkpoints++; checkpoints == 2 {
						kill()
					}
				}
			},
		}
		_, _ = job.Run(ctx, c)
		kill()
	}
	completed := 0
	for o, err := range bucket.List(t.Context(), "checkpoints/") {
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(o.Key, "/checkpoint.json") {
			completed++
		}
	}
	// keep completed, plus at most the run's newest ones GC did not see yet.
	if completed > keep+2 {
		t.Fatalf("%d records after %d runs of 2 checkpoints with keep %d: the runs' GC did not collect", completed, runs, keep)
	}
}
