package jetstream_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/tidemark-io/tidemark/blobstorage"
	tmjs "github.com/tidemark-io/tidemark/connector/jetstream"
	"github.com/tidemark-io/tidemark/integration/jsjob/totals"
	"github.com/tidemark-io/tidemark/integration/miniotest"
	"github.com/tidemark-io/tidemark/integration/natstest"
	"github.com/tidemark-io/tidemark/job"
	"github.com/tidemark-io/tidemark/s3store"
)

// BenchmarkJobJetStream runs the totals.Job job from a JetStream
// stream of TIDEMARK_BENCH_NATS_RECORDS records (default 200000, 4
// partitions) to an exactly-once JetStream output, checkpointing into
// MinIO, three times on the same input:
//
//   - every 1s: a checkpoint each second, output through the
//     exactly-once Sink;
//   - off: no checkpoint until the input ends (Interval 1h), output
//     published straight to the output stream (at-least-once, as a job
//     without checkpoints would): the baseline;
//   - off, exactly-once sink: no checkpoint until the end, where one
//     commits the whole output;
//
// and prints records/s of each, the overhead of 1s checkpoints against
// the baseline in %, the recovery time of a fourth run killed at half
// the input and resumed on a new node (benchRecovery), and
// for the 1s run the checkpoint latency p50/p99 from the barrier to the
// sink's commit (output visible) and to the runtime's completion event.
// Both outputs are checked exactly once. Run it once:
//
//	TIDEMARK_MINIO=process go test -run '^$' -bench BenchmarkJobJetStream -benchtime=1x ./connector/jetstream/
func BenchmarkJobJetStream(b *testing.B) {
	n := natstest.BenchRecords(b, 200000)
	const parts = 4
	nsrv := natstest.StartProcess(b)
	msrv := miniotest.Start(b)
	js := nsrv.JetStream(b)
	if _, err := tmjs.CreateInputStream(b.Context(), js, "in", 1); err != nil {
		b.Fatal(err)
	}
	fill := time.Now()
	publishInput(b, js, parts, 0, n)
	b.Logf("filled %d records in %v", n, time.Since(fill).Round(time.Millisecond))

	for i := 0; i < b.N; i++ {
		on := benchRun(b, nsrv, msrv, fmt.Sprintf("outon%d", i), parts, n, time.Second, false)
		off := benchRun(b, nsrv, msrv, fmt.Sprintf("outoff%d", i), parts, n, time.Hour, true)
		offEO := benchRun(b, nsrv, msrv, fmt.Sprintf("outoffeo%d", i), parts, n, time.Hour, false)
		recovered, firstBatch := benchRecovery(b, nsrv, msrv, fmt.Sprintf("outkill%d", i), parts, n)
		overhead := 100 * (off.rate - on.rate) / off.rate
		fmt.Printf("BenchmarkJobJetStream: %d records, %d partitions, NATS %s, MinIO %s\n", n, parts, nsrv.Mode(), msrv.Mode())
		fmt.Printf("  checkpoints every 1s: %8.0f records/s  (%d checkpoints in %v)\n", on.rate, on.checkpoints, on.elapsed.Round(time.Millisecond))
		fmt.Printf("  checkpointing off:    %8.0f records/s  (output published directly, %d checkpoint at the end, in %v)\n", off.rate, off.checkpoints, off.elapsed.Round(time.Millisecond))
		fmt.Printf("  off, exactly-once:    %8.0f records/s  (%d checkpoint at the end commits everything, in %v)\n", offEO.rate, offEO.checkpoints, offEO.elapsed.Round(time.Millisecond))
		fmt.Printf("  overhead of 1s checkpoints: %.1f%%\n", overhead)
		fmt.Printf("  checkpoint latency, barrier to output committed: p50 %v  p99 %v  (n=%d)\n", pct(on.commit, 50), pct(on.commit, 99), len(on.commit))
		fmt.Printf("  checkpoint latency, barrier to completion event: p50 %v  p99 %v  (n=%d)\n", pct(on.complete, 50), pct(on.complete, 99), len(on.complete))
		fmt.Printf("  recovery after a kill at half the input, new node with an empty disk: recovered in %v, first batch after %v\n", recovered.Round(time.Millisecond), firstBatch.Round(time.Millisecond))
		b.ReportMetric(on.rate, "rec/s-ckpt1s")
		b.ReportMetric(off.rate, "rec/s-ckptoff")
		b.ReportMetric(overhead, "overhead-%")
		b.ReportMetric(float64(pct(on.commit, 50).Milliseconds()), "ckpt-p50-ms")
		b.ReportMetric(float64(pct(on.commit, 99).Milliseconds()), "ckpt-p99-ms")
	}
}

type benchResult struct {
	rate             float64
	elapsed          time.Duration
	checkpoints      int
	commit, complete []time.Duration
}

func benchRun(b *testing.B, nsrv *natstest.Server, msrv *miniotest.Server, out string, parts, n int, interval time.Duration, direct bool) benchResult {
	b.Helper()
	ctx := b.Context()
	js := nsrv.JetStream(b)
	if err := tmjs.CreateOutputStreams(ctx, js, out, 1); err != nil {
		b.Fatal(err)
	}
	bucket, err := s3store.New(ctx, s3store.Options{
		Bucket: msrv.NewBucket(b), Endpoint: msrv.Endpoint, Region: msrv.Region, PathStyle: true,
		AccessKey: msrv.AccessKey, SecretKey: msrv.SecretKey,
	})
	if err != nil {
		b.Fatal(err)
	}
	all := make([]int, parts)
	for p := range all {
		all[p] = p
	}
	src, err := tmjs.NewSource(js, tmjs.SourceConfig{Stream: "in", Partitions: all, StopAtEnd: true})
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	sink, err := tmjs.NewSink(ctx, js, tmjs.SinkConfig{Stream: out, Partitions: parts})
	if err != nil {
		b.Fatal(err)
	}
	tm := &timings{barrier: map[string]time.Time{}}
	var jsink job.Sink = &timedSink{Sink: sink, tm: tm}
	if direct {
		jsink = &directSink{js: js, stream: out, parts: parts}
	}
	disk := b.TempDir()
	start := time.Now()
	res, err := job.Run(ctx, job.Config{
		Storage:   blobstorage.New(bucket, filepath.Join(disk, "checkpoints"), blobstorage.Options{}),
		Dir:       disk,
		Source:    &timedSource{Source: src, tm: tm},
		Processor: totals.Job{Parts: parts},
		Sink:      jsink,
		Interval:  interval,
		Observe: func(e job.Event) {
			if e.Kind == "checkpoint" {
				tm.completed(e.Checkpoint)
			}
		},
	})
	elapsed := time.Since(start)
	if err != nil {
		b.Fatal(err)
	}
	if res.Records != uint64(n) {
		b.Fatalf("%s: read %d records, want %d", out, res.Records, n)
	}
	checkTotals(b, readOutput(b, js, out), parts, n)
	return benchResult{
		rate: float64(n) / elapsed.Seconds(), elapsed: elapsed, checkpoints: res.Checkpoints,
		commit: tm.commit, complete: tm.complete,
	}
}

// timings pairs each checkpoint's barrier (Source.Offsets; one checkpoint
// is in flight at a time) with its Prepare, Commit and completion.
type timings struct {
	mu       sync.Mutex
	last     time.Time            // the latest barrier, not yet named
	barrier  map[string]time.Time // checkpoint id → barrier time
	commit   []time.Duration
	complete []time.Duration
}

func (tm *timings) completed(id string) {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	if t0, ok := tm.barrier[id]; ok {
		tm.complete = append(tm.complete, time.Since(t0))
		delete(tm.barrier, id)
	}
}

type timedSource struct {
	*tmjs.Source
	tm *timings
}

func (s *timedSource) Offsets() ([]byte, error) {
	s.tm.mu.Lock()
	s.tm.last = time.Now()
	s.tm.mu.Unlock()
	return s.Source.Offsets()
}

type timedSink struct {
	*tmjs.Sink
	tm        *timings
	committed sync.Map
}

func (s *timedSink) Prepare(ctx context.Context, txn job.Txn) error {
	s.tm.mu.Lock()
	s.tm.barrier[txn.ID] = s.tm.last
	s.tm.mu.Unlock()
	return s.Sink.Prepare(ctx, txn)
}

func (s *timedSink) Commit(ctx context.Context, txn job.Txn) error {
	err := s.Sink.Commit(ctx, txn)
	if _, again := s.committed.LoadOrStore(txn.ID, true); err == nil && !again {
		s.tm.mu.Lock()
		if t0, ok := s.tm.barrier[txn.ID]; ok {
			s.tm.commit = append(s.tm.commit, time.Since(t0))
		}
		s.tm.mu.Unlock()
	}
	return err
}

// pct returns the p-th percentile (nearest rank) of ds.
func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (p*len(s) + 99) / 100
	return s[max(i-1, 0)].Round(time.Millisecond)
}

// directSink publishes output straight to the output stream: what a job
// without checkpoints would do (at-least-once on a crash). Prepare waits
// for the acknowledgements; Commit has nothing left to do.
type directSink struct {
	js      natsjs.JetStream
	stream  string
	parts   int
	futures []natsjs.PubAckFuture
}

func (s *directSink) Write(ctx context.Context, _ job.Txn, recs []job.Record) error {
	for _, r := range recs {
		f, err := s.js.PublishMsgAsync(tmjs.NewMsg(tmjs.PartitionSubject(s.stream, tmjs.PartitionOf(r.Key, s.parts)), r))
		if err != nil {
			return err
		}
		s.futures = append(s.futures, f)
		if len(s.futures) >= 1024 {
			if err := s.Prepare(ctx, job.Txn{}); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *directSink) Prepare(ctx context.Context, _ job.Txn) error {
	for _, f := range s.futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.futures = s.futures[:0]
	return nil
}

func (*directSink) Commit(context.Context, job.Txn) error { return nil }
func (*directSink) Abort(context.Context, job.Txn) error  { return nil }

// benchRecovery runs the job with 1s checkpoints, kills it (its context)
// at half the input once a checkpoint completed, and resumes it on a new
// node (empty disk, new connection). It returns the time from the new
// node's start to its recovery ("start" event: writer role taken, state
// restored from MinIO, the prepared transaction rolled forward, the source
// seeked) and to its first processed batch; the output is checked exactly
// once.
func benchRecovery(b *testing.B, nsrv *natstest.Server, msrv *miniotest.Server, out string, parts, n int) (recovered, firstBatch time.Duration) {
	b.Helper()
	ctx := b.Context()
	if err := tmjs.CreateOutputStreams(ctx, nsrv.JetStream(b), out, 1); err != nil {
		b.Fatal(err)
	}
	bucketName := msrv.NewBucket(b)
	all := make([]int, parts)
	for p := range all {
		all[p] = p
	}
	node := func(die bool) (time.Duration, time.Duration, error) {
		js := nsrv.JetStream(b)
		bucket, err := s3store.New(ctx, s3store.Options{
			Bucket: bucketName, Endpoint: msrv.Endpoint, Region: msrv.Region, PathStyle: true,
			AccessKey: msrv.AccessKey, SecretKey: msrv.SecretKey,
		})
		if err != nil {
			b.Fatal(err)
		}
		src, err := tmjs.NewSource(js, tmjs.SourceConfig{Stream: "in", Partitions: all, StopAtEnd: true})
		if err != nil {
			b.Fatal(err)
		}
		defer src.Close()
		sink, err := tmjs.NewSink(ctx, js, tmjs.SinkConfig{Stream: out, Partitions: parts})
		if err != nil {
			b.Fatal(err)
		}
		disk := b.TempDir()
		rctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var recovered, first time.Duration
		completed := false
		start := time.Now()
		_, err = job.Run(rctx, job.Config{
			Storage:   blobstorage.New(bucket, filepath.Join(disk, "checkpoints"), blobstorage.Options{}),
			Dir:       disk,
			Source:    src,
			Processor: totals.Job{Parts: parts},
			Sink:      sink,
			Interval:  time.Second,
			Observe: func(e job.Event) {
				switch {
				case e.Kind == "start":
					recovered = time.Since(start)
				case e.Kind == "batch" && first == 0:
					first = time.Since(start)
				case e.Kind == "checkpoint":
					completed = true
				}
				if die && completed && e.Records >= uint64(n/2) {
					cancel()
				}
			},
		})
		return recovered, first, err
	}
	if _, _, err := node(true); !errors.Is(err, context.Canceled) {
		b.Fatalf("first node: %v, want it killed mid-stream", err)
	}
	recovered, firstBatch, err := node(false)
	if err != nil {
		b.Fatalf("second node: %v", err)
	}
	checkTotals(b, readOutput(b, nsrv.JetStream(b), out), parts, n)
	return recovered, firstBatch
}
