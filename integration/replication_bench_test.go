package integration

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/integration/miniotest"
	"github.com/tidemark-io/tidemark/job"
	"github.com/tidemark-io/tidemark/s3store"
)

// BenchmarkReplicationRecoveryPoint prints the recovery point of a
// replica (docs/replication.md) between two MinIO servers: a job with a
// checkpoint every second writes to A, its state growing by
// TIDEMARK_RP_KIB_PER_S KiB a second (default 1024, so about 1 MiB of
// new tables per checkpoint), while a Replicator with its default poll
// interval (TIDEMARK_RP_POLL_MS overrides it) copies to B, for
// TIDEMARK_RP_SECONDS (default 60). It reports two distributions:
//
//   - the recovery point sampled every 10 ms: what the metric shows at a
//     random instant (0 while B holds A's latest completed checkpoint);
//   - per checkpoint, from when A completed it to when B's pointer named
//     it: the recovery point's peak each checkpoint causes.
//
// Run it once:
//
//	TIDEMARK_MINIO=process go test -run '^$' -bench BenchmarkReplicationRecoveryPoint -benchtime=1x ./integration/
func BenchmarkReplicationRecoveryPoint(b *testing.B) {
	secs := envInt(b, "TIDEMARK_RP_SECONDS", 60)
	kibPerSec := envInt(b, "TIDEMARK_RP_KIB_PER_S", 1024)
	poll := time.Duration(envInt(b, "TIDEMARK_RP_POLL_MS", int(blobstorage.DefaultReplicateInterval/time.Millisecond))) * time.Millisecond
	srvA, srvB := miniotest.Start(b), miniotest.Start(b)
	bsA, bsB := openBenchBucket(b, srvA), openBenchBucket(b, srvB)

	const recordsPerSec = 1000
	src := &drillJob{jobNumbers: jobNumbers{n: 1 << 30, batch: 20}, pause: 20 * time.Millisecond, ballast: kibPerSec << 10 / recordsPerSec}
	disk := b.TempDir()
	cfg := job.Config{
		Storage: blobstorage.New(bsA, disk+"/checkpoints", blobstorage.Options{}), Dir: disk,
		Source: src, Processor: src, Sink: job.NewBlobSink(bsA, "out/"), Interval: time.Second,
	}
	delays := &delayLog{}
	r := blobstorage.NewReplicator(bsA, bsB, blobstorage.ReplicateOptions{Interval: poll, Observer: delays})

	for range b.N {
		ctx, stop := context.WithCancel(b.Context())
		jobDone := make(chan error, 1)
		go func() { _, err := job.Run(ctx, cfg); jobDone <- err }()
		runDone := make(chan error, 1)
		go func() { runDone <- r.Run(ctx) }()

		var samples []time.Duration
		tick := time.NewTicker(10 * time.Millisecond)
		start := time.Now()
		for time.Since(start) < time.Duration(secs)*time.Second {
			<-tick.C
			if time.Since(start) > 5*time.Second { // after the first checkpoints
				samples = append(samples, r.RecoveryPoint(time.Now()))
			}
		}
		tick.Stop()
		stop()
		if err := <-runDone; err != nil {
			b.Fatalf("Run: %v", err)
		}
		<-jobDone
		per := delays.get()
		if len(per) < secs/2 {
			b.Fatalf("only %d checkpoints replicated in %d s", len(per), secs)
		}
		sp, pp := percentiles(samples), percentiles(per)
		fmt.Printf("replication recovery point, A → B on two MinIO servers (%s), checkpoint interval 1 s, state +%d KiB/s, poll %v, %d s:\n",
			srvA.Mode(), kibPerSec, poll, secs)
		fmt.Printf("  sampled every 10 ms (%d samples):        p50 %v  p99 %v  max %v\n", len(samples), sp[0], sp[1], sp[2])
		fmt.Printf("  per checkpoint, A completed → B holds (%d): p50 %v  p99 %v  max %v\n", len(per), pp[0], pp[1], pp[2])
		delays.mu.Lock()
		cp := percentiles(delays.copies)
		delays.mu.Unlock()
		fmt.Printf("  of which the copy itself:                 p50 %v  p99 %v  max %v\n", cp[0], cp[1], cp[2])
		b.ReportMetric(sp[0].Seconds(), "rp-p50-s")
		b.ReportMetric(sp[1].Seconds(), "rp-p99-s")
		b.ReportMetric(pp[0].Seconds(), "ckpt-p50-s")
		b.ReportMetric(pp[1].Seconds(), "ckpt-p99-s")
	}
}

func openBenchBucket(b *testing.B, srv *miniotest.Server) *s3store.Store {
	b.Helper()
	bs, err := targetOf(srv, srv.NewBucket(b)).open(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	return bs
}

// percentiles returns p50, p99 and the maximum of d, rounded to the
// millisecond.
func percentiles(d []time.Duration) [3]time.Duration {
	if len(d) == 0 {
		return [3]time.Duration{}
	}
	s := slices.Clone(d)
	slices.Sort(s)
	at := func(p float64) time.Duration { return s[min(len(s)-1, int(p*float64(len(s))))].Round(time.Millisecond) }
	return [3]time.Duration{at(0.50), at(0.99), s[len(s)-1].Round(time.Millisecond)}
}

// delayLog records, for every checkpoint copied, how long after the
// source completed it the replica held it.
type delayLog struct {
	mu     sync.Mutex
	d      []time.Duration
	copies []time.Duration
}

func (l *delayLog) Behind(time.Time) {}

func (l *delayLog) Replicated(st blobstorage.ReplicationStats) {
	if st.Err != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.d = append(l.d, time.Since(st.Completed))
	l.copies = append(l.copies, st.Duration)
}

func (l *delayLog) get() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.d)
}
