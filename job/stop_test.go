package job_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstore/memstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/job"
	"github.com/tidemark-io/tidemark/job/jobtest"
)

// startUntil starts cfg and returns once it read at least records.
func startUntil(t *testing.T, cfg job.Config, records uint64) *job.Job {
	t.Helper()
	reached := make(chan struct{})
	var once sync.Once
	cfg.Observe = func(e job.Event) {
		if e.Records >= records {
			once.Do(func() { close(reached) })
		}
	}
	j, err := job.Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-reached:
	case <-time.After(30 * time.Second):
		t.Fatal("the job did not reach its records")
	}
	return j
}

// Stop drains, commits everything read and writes a savepoint; a resume
// on an empty node seeks exactly past it (nothing reprocessed), and the
// savepoint restores into another store with the state it had.
func TestStopWithSavepointThenResume(t *testing.T) {
	bucket := memstore.New()
	sink := job.NewBlobSink(bucket, "out/")
	d1 := t.TempDir()
	// No cadence checkpoint: every committed record comes from Stop's.
	j := startUntil(t, job.Config{
		Storage: node(t, bucket, d1), Dir: d1, Source: &source{n: 1 << 30, batch: 10},
		Processor: summer{}, Sink: sink, Interval: time.Hour, State: smallState,
	}, 500)
	ctx, cancel := context.WithTimeout(t.Context(), 25*time.Second)
	defer cancel()
	res, err := j.Stop(ctx, job.StopOptions{Savepoint: "before-upgrade"})
	if err != nil {
		t.Fatalf("stop: %v", err)
	}
	if res.Checkpoints != 1 || res.Savepoint != checkpoint.SavepointKey("before-upgrade") {
		t.Errorf("stop: %+v, want one final checkpoint and the savepoint", res)
	}
	read := int(res.Records)
	checkRange(t, jobtest.BlobOutput(t, sink), 1, read) // everything read is committed

	// Resume on an empty node.
	d2 := t.TempDir()
	src := &source{n: read + 100, batch: 10}
	if _, err := job.Run(t.Context(), job.Config{
		Storage: node(t, bucket, d2), Dir: d2, Source: src, Processor: summer{}, Sink: sink, State: smallState,
	}); err != nil {
		t.Fatalf("resume: %v", err)
	}
	if !slices.Equal(src.seeks, []int{read}) {
		t.Errorf("resume sought %v, want [%d]: records reprocessed or skipped", src.seeks, read)
	}
	checkExactlyOnce(t, jobtest.BlobOutput(t, sink), read+100)

	// The savepoint restores into another store, state included.
	other := memstore.New()
	d3 := t.TempDir()
	st := node(t, other, d3)
	if _, err := st.Acquire(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := checkpoint.RestoreSavepoint(t.Context(), st, bucket, "before-upgrade"); err != nil {
		t.Fatalf("restore savepoint: %v", err)
	}
	src = &source{n: read + 50, batch: 10}
	sink2 := job.NewBlobSink(other, "out/")
	if _, err := job.Run(t.Context(), job.Config{
		Storage: st, Dir: d3, Source: src, Processor: summer{}, Sink: sink2, State: smallState,
	}); err != nil {
		t.Fatalf("run from savepoint: %v", err)
	}
	if !slices.Equal(src.seeks, []int{read}) {
		t.Errorf("run from savepoint sought %v, want [%d]", src.seeks, read)
	}
	checkRange(t, jobtest.BlobOutput(t, sink2), read+1, read+50) // totals continue: the state came along

	// A second savepoint of the same label is refused, changing nothing.
	d4 := t.TempDir()
	j = startUntil(t, job.Config{
		Storage: node(t, bucket, d4), Dir: d4, Source: &source{n: 1 << 30, batch: 10},
		Processor: summer{}, Sink: sink, Interval: time.Hour, State: smallState,
	}, 10)
	if _, err := j.Stop(ctx, job.StopOptions{Savepoint: "before-upgrade"}); !errors.Is(err, checkpoint.ErrSavepointExists) {
		t.Errorf("stop with an existing label: %v, want ErrSavepointExists", err)
	}
	if res, err := j.Stop(ctx, job.StopOptions{}); err != nil || res.Checkpoints != 1 {
		t.Errorf("stop after the refusal: %+v %v, want the job still running, then stopped", res, err)
	}
}

// Stop past its deadline kills the job as a crash would: the error says
// so, and a resume on an empty node is exactly once.
func TestStopPastDeadlineIsCrashSafe(t *testing.T) {
	bucket := memstore.New()
	sink := job.NewBlobSink(bucket, "out/")
	d1 := t.TempDir()
	j := startUntil(t, job.Config{
		Storage: node(t, bucket, d1), Dir: d1, Source: &source{n: 1 << 30, batch: 10},
		Processor: summer{}, Sink: sink, EveryRecords: 100, State: smallState,
	}, 300)
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // the deadline has passed
	if _, err := j.Stop(ctx, job.StopOptions{Savepoint: "late"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("stop: %v, want the deadline's error", err)
	}
	_, _ = j.Wait() // it may still be ending: let it, before d1 goes
	d2 := t.TempDir()
	src := &source{n: 1000, batch: 10}
	if _, err := job.Run(t.Context(), job.Config{
		Storage: node(t, bucket, d2), Dir: d2, Source: src, Processor: summer{}, Sink: sink, State: smallState,
	}); err != nil {
		t.Fatalf("resume: %v", err)
	}
	checkExactlyOnce(t, jobtest.BlobOutput(t, sink), 1000)
}

// stuckSource is a source whose Next, once stuck is closed, blocks until
// unstick is closed, ignoring its ctx. It closes blocked when it blocks.
type stuckSource struct {
	*source
	stuck, unstick, blocked chan struct{}
	once                    sync.Once
}

func (s *stuckSource) Next(ctx context.Context) ([]job.Record, error) {
	select {
	case <-s.stuck:
		s.once.Do(func() { close(s.blocked) })
		<-s.unstick
	default:
	}
	return s.source.Next(ctx)
}

// Stop returns once its deadline passed even if the job is stuck in a
// Source.Next that ignores ctx: the job is cancelled, Dir stays locked
// until it returned, and a resume is exactly once.
func TestStopDeadlineBoundsStuckSource(t *testing.T) {
	bucket := memstore.New()
	sink := job.NewBlobSink(bucket, "out/")
	dir := t.TempDir()
	src := &stuckSource{source: &source{n: 1 << 30, batch: 10},
		stuck: make(chan struct{}), unstick: make(chan struct{}), blocked: make(chan struct{})}
	cfg := job.Config{
		Storage: node(t, bucket, dir), Dir: dir, Source: src,
		Processor: summer{}, Sink: sink, EveryRecords: 100, State: smallState,
	}
	j := startUntil(t, cfg, 300)
	close(src.stuck)
	// Stop only once Next is stuck: a Stop that lands while the loop is
	// between a Next and its check of the stop request drains at once,
	// as it should, and the deadline is never tested.
	<-src.blocked
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	res, err := j.Stop(ctx, job.StopOptions{Savepoint: "never"})
	if !errors.Is(err, context.DeadlineExceeded) || res.Checkpoints != 0 {
		t.Fatalf("stop: %+v %v, want the deadline's error and an empty Result", res, err)
	}
	// Next is still stuck: the job has not returned, and holds Dir.
	cfg.Source = &source{n: 1000, batch: 10}
	if _, err := job.Start(t.Context(), cfg); !errors.Is(err, job.ErrDirLocked) {
		t.Fatalf("Start while the stopped job is stuck: %v, want ErrDirLocked", err)
	}
	close(src.unstick)
	if _, err := j.Wait(); !errors.Is(err, context.Canceled) {
		t.Errorf("the stuck job ended with %v, want cancelled", err)
	}
	if ok, err := bucket.Exists(t.Context(), checkpoint.SavepointKey("never")); err != nil || ok {
		t.Errorf("a savepoint was written after the deadline: %v %v", ok, err)
	}
	if _, err := job.Run(t.Context(), cfg); err != nil {
		t.Fatalf("resume: %v", err)
	}
	checkExactlyOnce(t, jobtest.BlobOutput(t, sink), 1000)
}

// A Stop whose label cannot name a savepoint is refused and the job
// keeps running.
func TestStopRefusesBadLabel(t *testing.T) {
	bucket := memstore.New()
	d := t.TempDir()
	j := startUntil(t, job.Config{
		Storage: node(t, bucket, d), Dir: d, Source: &source{n: 1 << 30, batch: 10},
		Processor: summer{}, Sink: job.NewBlobSink(bucket, "out/"), State: smallState,
	}, 10)
	if _, err := j.Stop(t.Context(), job.StopOptions{Savepoint: "../x"}); err == nil {
		t.Fatal("stop with label ../x: no error")
	}
	res, err := j.Stop(t.Context(), job.StopOptions{})
	if err != nil || res.Checkpoints != 1 {
		t.Errorf("stop after the refusal: %+v %v, want a final checkpoint", res, err)
	}
}
