package integration

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstorage"
	tmjs "github.com/tidemark-io/tidemark/connector/jetstream"
	"github.com/tidemark-io/tidemark/integration/miniotest"
	"github.com/tidemark-io/tidemark/integration/natstest"
	"github.com/tidemark-io/tidemark/job"
	"github.com/tidemark-io/tidemark/s3store"
)

// BenchmarkJetStreamWorkers runs the partition totals job of
// integration/jsjob over a coordinator (in this process) and 3 worker
// processes, on one nats-server process and MinIO, from a stream of
// TIDEMARK_BENCH_NATS_RECORDS records (default 300000, 6 partitions, 2
// per worker) to an exactly-once JetStream output, three times:
//
//   - every 1s: a barrier each second;
//   - off: no barrier until the input is read (Interval 1h), the same
//     Sink staging everything: the baseline;
//   - every 1s with worker w1 killed (SIGKILL) at half the input and a
//     replacement process started at once on an empty disk.
//
// It prints records/s of the first two to the last record read (from
// the coordinator's start; output staged by then, committed by the
// checkpoints that follow), the overhead of 1s checkpoints in %, the 1s
// run's rate to the job's end (every output committed), the checkpoint
// latency p50/p99 from the barrier's announce to the coordinator's
// completion event, and, for the third, the time from the SIGKILL to the
// replacement's first batch, to every slot's first batch of the new
// generation, and to the completion of the first checkpoint cut after
// the kill. The
// outputs of the first and third runs are checked exactly once. Run it
// once:
//
//	TIDEMARK_MINIO=process go test -run '^$' -bench BenchmarkJetStreamWorkers -benchtime=1x ./integration/
func BenchmarkJetStreamWorkers(b *testing.B) {
	n := natstest.BenchRecords(b, 300000)
	const parts = 6
	bin := buildJSJob(b.Context(), b, b.TempDir())
	nsrv := natstest.Start(b) // a process unless TIDEMARK_NATS says otherwise
	msrv := miniotest.Start(b)
	bj := &benchJob{b: b, bin: bin, nsrv: nsrv, msrv: msrv, parts: parts, n: n}
	fill := time.Now()
	if out, err := bj.command("setup", "-records", strconv.Itoa(n)).CombinedOutput(); err != nil {
		b.Fatalf("jsjob setup: %v\n%s", err, out)
	}
	b.Logf("filled %d records in %v", n, time.Since(fill).Round(time.Millisecond))
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		on := bj.run(fmt.Sprintf("on%d", i), time.Second, false)
		off := bj.run(fmt.Sprintf("off%d", i), time.Hour, false)
		kill := bj.run(fmt.Sprintf("kill%d", i), time.Second, true)
		b.Logf("three runs in %v", time.Since(t0).Round(time.Millisecond))
		overhead := 100 * (off.rate - on.rate) / off.rate
		fmt.Printf("BenchmarkJetStreamWorkers: %d records, %d partitions, 3 worker processes, NATS %s, MinIO %s\n", n, parts, nsrv.Mode(), msrv.Mode())
		fmt.Printf("  checkpoints every 1s: %8.0f records/s  (all read in %v; %d checkpoints, the job ended, output committed, after %v: %.0f records/s)\n",
			on.rate, on.read.Round(time.Millisecond), len(on.latency), on.ended.Round(time.Millisecond), on.endRate)
		fmt.Printf("  checkpointing off:    %8.0f records/s  (all read in %v, output staged, none committed)\n", off.rate, off.read.Round(time.Millisecond))
		fmt.Printf("  overhead of 1s checkpoints: %.1f%%\n", overhead)
		fmt.Printf("  checkpoint latency, barrier to completed: p50 %v  p99 %v  (n=%d)\n", pct(on.latency, 50), pct(on.latency, 99), len(on.latency))
		fmt.Printf("  worker SIGKILL at half the input, replacement on an empty disk at once: its first batch after %v, every slot processing after %v, next checkpoint cut after it completed after %v\n",
			kill.firstBatch.Round(time.Millisecond), kill.allProcessing.Round(time.Millisecond), kill.nextCheckpoint.Round(time.Millisecond))
		b.ReportMetric(on.rate, "rec/s-ckpt1s")
		b.ReportMetric(off.rate, "rec/s-ckptoff")
		b.ReportMetric(overhead, "overhead-%")
		b.ReportMetric(float64(pct(on.latency, 50).Milliseconds()), "ckpt-p50-ms")
		b.ReportMetric(float64(pct(on.latency, 99).Milliseconds()), "ckpt-p99-ms")
		b.ReportMetric(float64(kill.allProcessing.Milliseconds()), "recovery-ms")
	}
}

// pct is the p-th percentile of ds.
func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (p*len(s) + 99) / 100
	return s[max(i-1, 0)].Round(time.Millisecond)
}

// benchJob runs the jsjob job for BenchmarkJetStreamWorkers.
type benchJob struct {
	b        *testing.B
	bin      string
	nsrv     *natstest.Server
	msrv     *miniotest.Server
	parts, n int
}

// command is jsjob role on the benchmark's servers.
func (j *benchJob) command(role string, args ...string) *exec.Cmd {
	cmd := exec.Command(j.bin, append([]string{role, "-nats", j.nsrv.URL, "-parts", strconv.Itoa(j.parts)}, args...)...)
	cmd.Env = append(os.Environ(), "NATS_USER="+j.nsrv.User, "NATS_PASSWORD="+j.nsrv.Password,
		"AWS_ACCESS_KEY_ID="+j.msrv.AccessKey, "AWS_SECRET_ACCESS_KEY="+j.msrv.SecretKey, "AWS_REGION="+j.msrv.Region)
	return cmd
}

// benchWorker is a worker process and what its output said, with times.
type benchWorker struct {
	cmd  *exec.Cmd
	done chan error

	mu         sync.Mutex
	records    uint64
	started    []time.Time // "start" lines
	firstBatch []time.Time // the first "records" line after each start
}

func (j *benchJob) worker(name, slot, store string, k int) *benchWorker {
	j.b.Helper()
	cmd := j.command("worker", "-store", store, "-group", name, "-out", name, "-slot", slot, "-batch", "100",
		"-partitions", fmt.Sprintf("%d,%d", k, k+3), "-dir", filepath.Join(j.b.TempDir(), slot))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		j.b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		j.b.Fatal(err)
	}
	w := &benchWorker{cmd: cmd, done: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			now := time.Now()
			line := sc.Text()
			w.mu.Lock()
			switch {
			case strings.HasPrefix(line, "start "):
				w.started = append(w.started, now)
			case strings.HasPrefix(line, "records "):
				w.records, _ = strconv.ParseUint(strings.TrimPrefix(line, "records "), 10, 64)
				if len(w.firstBatch) < len(w.started) {
					w.firstBatch = append(w.firstBatch, now)
				}
			}
			w.mu.Unlock()
		}
		err := cmd.Wait()
		if err != nil && stderr.Len() > 0 {
			err = fmt.Errorf("%w: %s", err, stderr.String())
		}
		w.done <- err
	}()
	j.b.Cleanup(func() { _ = cmd.Process.Kill() }) // by its pid; done if it exited
	return w
}

// batchAfter returns the time of the worker's first batch of a
// generation started after t (zero if none yet).
func (w *benchWorker) batchAfter(t time.Time) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, s := range w.started {
		if s.After(t) && i < len(w.firstBatch) {
			return w.firstBatch[i]
		}
	}
	return time.Time{}
}

// timedGroup notes when each barrier is announced.
type timedGroup struct {
	*tmjs.Group
	mu      sync.Mutex
	barrier map[string]time.Time
}

func (g *timedGroup) Announce(ctx context.Context, p job.Plan) error {
	if p.Barrier != "" {
		g.mu.Lock()
		if _, ok := g.barrier[p.Barrier]; !ok {
			g.barrier[p.Barrier] = time.Now()
		}
		g.mu.Unlock()
	}
	return g.Group.Announce(ctx, p)
}

// workersResult is what one run measured.
type workersResult struct {
	rate, endRate float64 // records/s to the last record read, to the job's end
	read, ended   time.Duration
	latency       []time.Duration
	// After the SIGKILL of a worker (kill runs only).
	firstBatch, allProcessing, nextCheckpoint time.Duration
}

// run runs the job once into its own output stream, group and prefix;
// with kill, worker w1 is SIGKILLed at half the input and replaced.
func (j *benchJob) run(name string, interval time.Duration, kill bool) workersResult {
	b := j.b
	b.Helper()
	ctx, cancel := context.WithTimeout(b.Context(), 10*time.Minute)
	defer cancel()
	if out, err := j.command("setup", "-out", name, "-records", "0").CombinedOutput(); err != nil {
		b.Fatalf("jsjob setup -out %s: %v\n%s", name, err, out)
	}
	bucket := j.msrv.NewBucket(b)
	store := fmt.Sprintf("s3://%s/%s?endpoint=%s&path_style=true&region=%s", bucket, name, j.msrv.Endpoint, j.msrv.Region)
	bs, err := s3store.New(ctx, s3store.Options{
		Bucket: bucket, Prefix: name + "/", Endpoint: j.msrv.Endpoint, Region: j.msrv.Region, PathStyle: true,
		AccessKey: j.msrv.AccessKey, SecretKey: j.msrv.SecretKey,
	})
	if err != nil {
		b.Fatal(err)
	}
	js := j.nsrv.JetStream(b)
	g, err := tmjs.NewGroup(ctx, js, name, 1)
	if err != nil {
		b.Fatal(err)
	}
	tg := &timedGroup{Group: g, barrier: map[string]time.Time{}}
	var mu sync.Mutex
	var latency []time.Duration
	var killedAt time.Time    // set under mu
	var completed []time.Time // of checkpoints announced after the kill
	start := time.Now()
	coordDone := make(chan error, 1)
	go func() {
		_, err := job.RunCoordinator(ctx, job.CoordinatorConfig{
			Group:   tg,
			Storage: blobstorage.New(bs, filepath.Join(b.TempDir(), "checkpoints"), blobstorage.Options{}),
			Slots:   []string{"w0", "w1", "w2"},
			Sink: func(slot string) (job.Sink, error) {
				return tmjs.NewSink(ctx, js, tmjs.SinkConfig{Stream: name, Partitions: 2, Part: slot})
			},
			Interval: interval,
			Timeout:  10 * time.Second,
			Observe: func(e job.Event) {
				if e.Kind != "checkpoint" {
					return
				}
				now := time.Now()
				tg.mu.Lock()
				at, ok := tg.barrier[e.Checkpoint]
				tg.mu.Unlock()
				mu.Lock()
				if ok && !killedAt.IsZero() && at.After(killedAt) {
					completed = append(completed, now)
				}
				if ok {
					latency = append(latency, now.Sub(at))
				}
				mu.Unlock()
			},
		})
		coordDone <- err
	}()
	workers := make([]*benchWorker, 3)
	for k := range workers {
		workers[k] = j.worker(name, fmt.Sprintf("w%d", k), store, k)
	}
	var res workersResult
	readAll := func() bool {
		var sum uint64
		for _, w := range workers {
			w.mu.Lock()
			sum += w.records
			w.mu.Unlock()
		}
		return sum >= uint64(j.n)
	}
	// A kill run ends with the job: survivors re-read from the checkpoint,
	// so the sum of records read says nothing there.
	for kill || !readAll() {
		if kill && killedAt.IsZero() && workers[1].progress() >= uint64(j.n/6) {
			if err := workers[1].cmd.Process.Signal(syscall.SIGKILL); err != nil {
				b.Fatal(err)
			}
			mu.Lock()
			killedAt = time.Now()
			mu.Unlock()
			<-workers[1].done
			workers[1] = j.worker(name, "w1", store, 1) // counts from 0 again
		}
		select {
		case err := <-coordDone:
			if !kill {
				b.Fatalf("run %s: the coordinator returned before every record was read: %v", name, err)
			}
			coordDone <- err
		case <-time.After(20 * time.Millisecond):
			continue
		}
		break
	}
	if kill && killedAt.IsZero() {
		b.Fatalf("run %s: the job ended before w1 read half its input", name)
	}
	res.read = time.Since(start)
	res.rate = float64(j.n) / res.read.Seconds()
	if interval > time.Minute {
		// The baseline: nothing more to measure; no barrier would come.
		b.Logf("run %s: all read after %v", name, res.read.Round(time.Millisecond))
		cancel()
		<-coordDone
		for _, w := range workers {
			_ = w.cmd.Process.Kill()
			<-w.done
		}
		return res
	}
	if err := <-coordDone; err != nil {
		b.Fatalf("run %s: coordinator: %v", name, err)
	}
	res.ended = time.Since(start)
	res.endRate = float64(j.n) / res.ended.Seconds()
	for k, w := range workers {
		if err := <-w.done; err != nil {
			b.Fatalf("run %s: worker w%d: %v", name, k, err)
		}
	}
	mu.Lock()
	res.latency = latency
	if kill {
		res.firstBatch = workers[1].batchAfter(killedAt).Sub(killedAt)
		var last time.Time
		for _, w := range workers {
			at := w.batchAfter(killedAt)
			if at.IsZero() {
				b.Fatalf("run %s: a worker never processed a batch after the kill", name)
			}
			if at.After(last) {
				last = at
			}
		}
		res.allProcessing = last.Sub(killedAt)
		if len(completed) == 0 {
			b.Fatalf("run %s: no checkpoint announced after the kill completed", name)
		}
		res.nextCheckpoint = completed[0].Sub(killedAt)
	}
	mu.Unlock()
	b.Logf("run %s: the job ended after %v", name, res.ended.Round(time.Millisecond))
	checked := time.Now()
	out, err := j.command("check", "-out", name, "-records", strconv.Itoa(j.n)).CombinedOutput()
	if err != nil || !strings.Contains(string(out), fmt.Sprintf("exactly-once: OK, %d records", j.n)) {
		b.Fatalf("run %s: jsjob check: %v\n%s", name, err, out)
	}
	b.Logf("run %s: %s in %v", name, strings.TrimSpace(string(out)), time.Since(checked).Round(time.Millisecond))
	return res
}

// progress is the number of records the worker read so far.
func (w *benchWorker) progress() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.records
}
