package integration

// Drills of continuous replication (blobstorage.Replicator) between two
// S3 servers, as docs/replication.md describes them: replicate while a
// job writes, kill the replicator (a real process, SIGKILL) mid-copy,
// cut the link to the replica for longer than several checkpoints,
// restore in the replica while the job keeps writing, and lose the
// job's store entirely and resume the job from the replica exactly
// once.

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"maps"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/integration/faultproxy"
	"github.com/tidemark-io/tidemark/integration/miniotest"
	"github.com/tidemark-io/tidemark/job"
	"github.com/tidemark-io/tidemark/s3store"
	"github.com/tidemark-io/tidemark/state"
)

// drillJob is jobNumbers slowed down to last through the drill, its
// state growing by ballast bytes per record so that every checkpoint has
// new tables to copy.
type drillJob struct {
	jobNumbers
	pause   time.Duration
	ballast int
}

func newDrillJob(n int) *drillJob {
	return &drillJob{jobNumbers: jobNumbers{n: n, batch: 20}, pause: 40 * time.Millisecond, ballast: 2 << 10}
}

func (d *drillJob) Next(ctx context.Context) ([]job.Record, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(d.pause):
	}
	return d.jobNumbers.Next(ctx)
}

func (d *drillJob) Process(ctx context.Context, st *state.Store, in []job.Record) ([]job.Record, error) {
	o, err := st.Owner("sum")
	if err != nil {
		return nil, err
	}
	b := make([]byte, d.ballast)
	for _, r := range in {
		_, _ = rand.Read(b) // incompressible: real tables to copy
		if err := o.Set(append([]byte("ballast/"), r.Key...), b); err != nil {
			return nil, err
		}
	}
	return d.jobNumbers.Process(ctx, st, in)
}

// drillConfig is the job of the drills on storage, with its sink.
func drillConfig(t *testing.T, storage blobstore.Blobstore, sink *job.BlobSink, src *drillJob) job.Config {
	disk := t.TempDir()
	return job.Config{
		Storage: blobstorage.New(storage, disk+"/checkpoints", blobstorage.Options{Keep: 3, Concurrency: 4}), Dir: disk,
		Source: src, Processor: src, Sink: sink, EveryRecords: 200, Interval: time.Hour,
		State: state.Options{MemTableSize: 256 << 10, CacheSize: 1 << 20},
	}
}

// startJob runs cfg in the background; the returned function waits for
// its end.
func startJob(ctx context.Context, cfg job.Config) func() (job.Result, error) {
	type ended struct {
		res job.Result
		err error
	}
	done := make(chan ended, 1)
	go func() {
		res, err := job.Run(ctx, cfg)
		done <- ended{res, err}
	}()
	return func() (job.Result, error) {
		e := <-done
		return e.res, e.err
	}
}

// restoreInReplica restores the replica's latest completed checkpoint on
// an empty node (no writer role: the replicator keeps it), verifying
// every file, and checks that its state is exact: the running total of
// the numbers its offsets say were read.
func restoreInReplica(t *testing.T, replica blobstore.Blobstore) string {
	t.Helper()
	ctx := t.Context()
	node := blobstorage.New(replica, t.TempDir(), blobstorage.Options{})
	cp, err := node.LoadLatestCompleted(ctx)
	if err != nil || cp == nil {
		t.Fatalf("the replica's latest completed checkpoint: %v, %v", cp, err)
	}
	if err := node.Restore(ctx, cp.ID); err != nil {
		t.Fatalf("restore %s in the replica: %v", cp.ID, err)
	}
	st, err := state.OpenCheckpoint(ctx, node.StateDir(cp.ID), t.TempDir()+"/live", state.Options{})
	if err != nil {
		t.Fatalf("open the state of %s restored from the replica: %v", cp.ID, err)
	}
	defer st.Close()
	o, err := st.Owner("sum")
	if err != nil {
		t.Fatal(err)
	}
	v, _, err := o.Get([]byte("total"))
	if err != nil {
		t.Fatal(err)
	}
	read, _ := strconv.Atoi(string(cp.Offsets()))
	if total, _ := strconv.Atoi(string(v)); total != read*(read+1)/2 {
		t.Fatalf("checkpoint %s restored from the replica: total %d after %d numbers, want %d", cp.ID, total, read, read*(read+1)/2)
	}
	return cp.ID
}

// sameCheckpoint checks that the replica holds the source's checkpoint
// id: the same files, restored on empty nodes.
func sameCheckpoint(t *testing.T, src, replica blobstore.Blobstore, id string) {
	t.Helper()
	restore := func(bs blobstore.Blobstore) map[string]string {
		node := blobstorage.New(bs, t.TempDir(), blobstorage.Options{})
		if err := node.Restore(t.Context(), id); err != nil {
			t.Fatalf("restore %s: %v", id, err)
		}
		files := map[string]string{}
		rec, err := node.LoadRecord(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		for owner, refs := range rec.Files {
			for _, f := range refs {
				files[owner+"/"+f.Path] = f.SHA256
			}
		}
		return files
	}
	if a, b := restore(src), restore(replica); !maps.Equal(a, b) {
		t.Fatalf("checkpoint %s: the replica's files differ from the source's", id)
	}
}

// replicateChildEnv holds, as JSON, the replication a re-executed test
// binary runs instead of tests (see TestMain), until it is killed.
const replicateChildEnv = "TIDEMARK_REPLICATE_CHILD"

// s3Target is a bucket on a server, as a child process opens it.
type s3Target struct {
	Endpoint, Region, AccessKey, SecretKey, Bucket string
}

func targetOf(srv *miniotest.Server, bucket string) s3Target {
	return s3Target{Endpoint: srv.Endpoint, Region: srv.Region, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey, Bucket: bucket}
}

func (s s3Target) open(ctx context.Context) (*s3store.Store, error) {
	return s3store.New(ctx, s3store.Options{
		Bucket: s.Bucket, Endpoint: s.Endpoint, Region: s.Region, PathStyle: true,
		AccessKey: s.AccessKey, SecretKey: s.SecretKey, PartSize: s3store.MinPartSize,
	})
}

type replicateChildJob struct {
	From, To s3Target
}

// replicateChild runs the replication in $TIDEMARK_REPLICATE_CHILD and
// returns the exit code. It writes a line per event to stdout: "put
// <key>" after every object the replica stored, "behind <unix nanos>"
// at every poll, "replicated <id>" after each checkpoint copied.
func replicateChild() int {
	var cfg replicateChildJob
	if err := json.Unmarshal([]byte(os.Getenv(replicateChildEnv)), &cfg); err != nil {
		fmt.Fprintf(os.Stderr, "replicate child: %v\n", err)
		return 2
	}
	ctx := context.Background()
	out := &lineWriter{w: bufio.NewWriter(os.Stdout)}
	from, err := cfg.From.open(ctx)
	if err == nil {
		var to *s3store.Store
		if to, err = cfg.To.open(ctx); err == nil {
			r := blobstorage.NewReplicator(from, &putLog{Blobstore: to, out: out}, blobstorage.ReplicateOptions{
				Interval: 50 * time.Millisecond, Keep: 3, Concurrency: 4, Observer: out,
			})
			err = r.Run(ctx)
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "replicate child: %v\n", err)
		return 1
	}
	return 0
}

// lineWriter writes the child's events, each flushed at once.
type lineWriter struct {
	mu sync.Mutex
	w  *bufio.Writer
}

func (l *lineWriter) line(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, format+"\n", args...)
	_ = l.w.Flush()
}

func (l *lineWriter) Behind(since time.Time) {
	if since.IsZero() {
		l.line("caught-up")
		return
	}
	l.line("behind %d", since.UnixNano())
}

func (l *lineWriter) Replicated(st blobstorage.ReplicationStats) {
	if st.Err == nil {
		l.line("replicated %s %d %d", st.ID, st.Objects, st.SkippedObjects)
	}
}

// putLog reports every object stored in the replica.
type putLog struct {
	blobstore.Blobstore
	out *lineWriter
}

func (p *putLog) Put(ctx context.Context, key string, r io.Reader) error {
	err := p.Blobstore.Put(ctx, key, r)
	if err == nil {
		p.out.line("put %s", key)
	}
	return err
}

func (p *putLog) PutIfAbsent(ctx context.Context, key string, r io.Reader) (string, error) {
	etag, err := p.Blobstore.PutIfAbsent(ctx, key, r)
	if err == nil {
		p.out.line("put %s", key)
	}
	return etag, err
}

func (p *putLog) Unwrap() blobstore.Blobstore { return p.Blobstore }

// replicatorProcess is a running replicate child.
type replicatorProcess struct {
	cmd    *exec.Cmd
	events chan string
	stderr strings.Builder
	done   chan error
}

func startReplicatorProcess(t *testing.T, cfg replicateChildJob) *replicatorProcess {
	t.Helper()
	raw, _ := json.Marshal(cfg)
	p := &replicatorProcess{events: make(chan string, 1<<16), done: make(chan error, 1)}
	p.cmd = exec.Command(os.Args[0])
	p.cmd.Env = append(os.Environ(), replicateChildEnv+"="+string(raw))
	p.cmd.Stderr = &p.stderr
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := p.cmd.Process.Pid
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL); <-p.done })
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.events <- sc.Text()
		}
		close(p.events)
		p.done <- p.cmd.Wait()
	}()
	return p
}

// kill kills the child with SIGKILL and returns every event it wrote.
func (p *replicatorProcess) kill(t *testing.T) []string {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var events []string
	for e := range p.events {
		events = append(events, e)
	}
	return events
}

// copying reports whether events end inside the copy of a checkpoint:
// objects stored since the last record (or none since a poll found the
// replica behind).
func copying(events []string) bool {
	mid := false
	for _, e := range events {
		key, isPut := strings.CutPrefix(e, "put ")
		switch {
		case isPut && blobstorage.KeyClass(key) == "record":
			mid = false
		case isPut && blobstorage.KeyClass(key) != "replication":
			mid = true
		}
	}
	return mid
}

// Drill 1 and 3 on two MinIO servers: a job writes to A while a
// replicator process copies to B and is killed with SIGKILL, each time
// just after a poll found B behind (so mid-copy), and restarted. After
// every kill B's latest completed checkpoint restores, on an empty node,
// with its state exact, while A keeps writing; no object is ever sent
// twice (an interrupted replication resumes without resending); and at
// the end B holds A's latest checkpoint, file for file.
func TestReplicationDrillKillTheReplicatorProcessWhileTheJobWrites(t *testing.T) {
	srvA, srvB := miniotest.Start(t), miniotest.Start(t)
	bucketA, bucketB := srvA.NewBucket(t), srvB.NewBucket(t)
	bsA, bsB := openBucket(t, srvA, bucketA), openBucket(t, srvB, bucketB)
	cfg := replicateChildJob{From: targetOf(srvA, bucketA), To: targetOf(srvB, bucketB)}

	const n = 6000
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	wait := startJob(ctx, drillConfig(t, bsA, job.NewBlobSink(bsA, "out/"), newDrillJob(n)))
	jobDone := make(chan struct{})
	var res job.Result
	var jobErr error
	go func() { res, jobErr = wait(); close(jobDone) }()

	puts := map[string]int{}
	kills, midCopy, restores := 0, 0, 0
	for running := true; running; {
		p := startReplicatorProcess(t, cfg)
		// After a checkpoint copied, kill it as soon as it stored an
		// object of the next one (every other time), or within 30 ms of
		// a poll that found B behind again.
		deadline := time.After(20 * time.Second)
		var seen []string
		copied, atPut := false, kills%2 == 0
	waitBehind:
		for {
			select {
			case e, ok := <-p.events:
				if !ok {
					t.Fatalf("the replicator process exited: %s", p.stderr.String())
				}
				seen = append(seen, e)
				key, isPut := strings.CutPrefix(e, "put ")
				switch {
				case strings.HasPrefix(e, "replicated "):
					copied = true
				case copied && atPut && isPut && blobstorage.KeyClass(key) != "record" && blobstorage.KeyClass(key) != "replication":
					break waitBehind
				case copied && !atPut && strings.HasPrefix(e, "behind "):
					time.Sleep(time.Duration(mrand.IntN(30)) * time.Millisecond)
					break waitBehind
				}
			case <-jobDone:
				running = false
				break waitBehind
			case <-deadline:
				t.Fatal("no poll found the replica behind in 20 s")
			}
		}
		events := append(seen, p.kill(t)...)
		kills++
		if copying(events) {
			midCopy++
		}
		for _, e := range events {
			if key, ok := strings.CutPrefix(e, "put "); ok {
				puts[key]++
			}
		}
		if id, _ := blobstorage.New(bsB, "", blobstorage.Options{}).PointerID(t.Context(), blobstorage.PointerLatestCompleted); id != "" {
			restoreInReplica(t, bsB) // while A keeps writing
			restores++
		}
	}
	if jobErr != nil {
		t.Fatalf("the job on A: %v", jobErr)
	}
	// The last replicator catches up with the finished job.
	p := startReplicatorProcess(t, cfg)
	for caughtUp := false; !caughtUp; {
		select {
		case e, ok := <-p.events:
			if !ok {
				t.Fatalf("the replicator process exited: %s", p.stderr.String())
			}
			if id, ok := strings.CutPrefix(e, "replicated "); ok && strings.HasPrefix(id, res.Last+" ") {
				caughtUp = true
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("the replica did not reach the job's last checkpoint %s in 30 s", res.Last)
		}
	}
	for _, e := range p.kill(t) {
		if key, ok := strings.CutPrefix(e, "put "); ok {
			puts[key]++
		}
	}
	t.Logf("%d kills, %d of them mid-copy; %d restores in B while A wrote; %d objects stored in B", kills, midCopy, restores, len(puts))
	if kills < 3 || midCopy == 0 || restores == 0 {
		t.Fatalf("%d kills, %d mid-copy, %d restores: the drill proves too little", kills, midCopy, restores)
	}
	for key, times := range puts {
		if c := blobstorage.KeyClass(key); times > 1 && (c == "shared" || c == "private") {
			t.Errorf("%s sent %d times", key, times)
		}
	}
	if got := restoreInReplica(t, bsB); got != res.Last {
		t.Fatalf("B's latest completed is %s, the job's last %s", got, res.Last)
	}
	sameCheckpoint(t, bsA, bsB, res.Last)
}

// Drills 2 and 3, with versitygw as the second region: the link to the
// replica is cut (connections refused and reset) for longer than several
// checkpoints while the job writes. Meanwhile the recovery point grows
// past the cut's length and the replica's latest checkpoint still
// restores (read over an uncut connection); once the link is back, the
// replicator catches up by itself and the recovery point falls to 0.
func TestReplicationDrillLinkCutToVersityGW(t *testing.T) {
	srvA, srvB := miniotest.Start(t), miniotest.StartVersity(t)
	bucketA, bucketB := srvA.NewBucket(t), srvB.NewBucket(t)
	bsA := openBucket(t, srvA, bucketA)
	proxy := faultproxy.New(t, srvB.Endpoint)
	viaLink := proxiedStore(t, srvB, bucketB, proxy.URL(), nil)
	direct := openBucket(t, srvB, bucketB)

	const n = 6000
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	wait := startJob(ctx, drillConfig(t, bsA, job.NewBlobSink(bsA, "out/"), newDrillJob(n)))
	r := blobstorage.NewReplicator(bsA, viaLink, blobstorage.ReplicateOptions{Interval: 100 * time.Millisecond, Keep: 3, Logger: testLogger(t)})
	rctx, stop := context.WithCancel(t.Context())
	defer stop()
	runErr := make(chan error, 1)
	go func() { runErr <- r.Run(rctx) }()

	waitFor(t, 30*time.Second, "a first checkpoint in the replica", func() bool {
		id, _ := blobstorage.New(direct, "", blobstorage.Options{}).PointerID(t.Context(), blobstorage.PointerLatestCompleted)
		return id != ""
	})
	before := restoreInReplica(t, direct)
	const cut = 5 * time.Second // ten checkpoints of the job
	proxy.Refuse(true)
	proxy.ResetAll()
	cutAt := time.Now()
	time.Sleep(cut)
	rpAtEnd := r.RecoveryPoint(time.Now())
	during := restoreInReplica(t, direct) // the replica is still restorable
	srcID, _ := blobstorage.New(bsA, "", blobstorage.Options{}).PointerID(t.Context(), blobstorage.PointerLatestCompleted)
	proxy.Refuse(false)
	t.Logf("cut for %v: A at %s, the replica at %s (before the cut %s); recovery point at the end of the cut %v", time.Since(cutAt).Round(time.Millisecond), srcID, during, before, rpAtEnd)
	if rpAtEnd < cut-time.Second {
		t.Fatalf("recovery point %v at the end of a %v cut, want about the cut's length", rpAtEnd, cut)
	}
	if srcID <= during {
		t.Fatalf("A (%s) did not move past the replica (%s) during the cut: the drill proves nothing", srcID, during)
	}
	// A request cut mid-body waits for the store client's idle timeout
	// (30 s) before its retry: catching up may take that long.
	healed := time.Now()
	waitFor(t, 90*time.Second, "the replica to catch up after the cut", func() bool {
		id, _ := blobstorage.New(direct, "", blobstorage.Options{}).PointerID(t.Context(), blobstorage.PointerLatestCompleted)
		return id >= srcID
	})
	t.Logf("the replica reached %s %v after the link came back", srcID, time.Since(healed).Round(time.Millisecond))
	res, err := wait()
	if err != nil {
		t.Fatalf("the job on A: %v", err)
	}
	// The status is written after the pointer moves: wait for both.
	waitFor(t, 30*time.Second, "the replica to hold the job's last checkpoint with a recovery point of 0", func() bool {
		id, _ := blobstorage.New(direct, "", blobstorage.Options{}).PointerID(t.Context(), blobstorage.PointerLatestCompleted)
		st, _ := blobstorage.ReadReplicationStatus(t.Context(), direct)
		return id == res.Last && r.RecoveryPoint(time.Now()) == 0 && st != nil && st.Checkpoint == res.Last
	})
	stop()
	if err := <-runErr; err != nil {
		t.Fatalf("Run: %v", err)
	}
	sameCheckpoint(t, bsA, direct, restoreInReplica(t, direct))
	st, err := blobstorage.ReadReplicationStatus(t.Context(), direct)
	if err != nil || st == nil || st.Checkpoint != res.Last || !st.BehindSince.IsZero() {
		srcNow, _ := blobstorage.New(bsA, "", blobstorage.Options{}).PointerID(t.Context(), blobstorage.PointerLatestCompleted)
		ids, _ := blobstorage.New(bsA, "", blobstorage.Options{}).IDs(t.Context())
		t.Fatalf("the replica's status %+v, %v (the job's last %s, A's latest completed %s, A's ids %v)", st, err, res.Last, srcNow, ids)
	}
}

func waitFor(t *testing.T, limit time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", limit, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Drill 5 on two MinIO servers: A is lost entirely (its server killed,
// its job's node too) mid-stream. The job resumes on B, the replica: it
// takes B's writer role, which fences the replicator, restores the
// latest checkpoint copied, and runs to the end.
//
// What exactly-once means after losing A: the sink's output must survive
// A, so it lives on B's server (a sink on A would be lost with it). The
// transactions A's job committed after the last checkpoint B holds are
// the recovery point's loss: committed, but of a lineage no surviving
// checkpoint continues. The job on B reads those records again and
// commits them in its own transactions, under ids after every id the
// sink saw. The output of the job is its lineage - A's transactions up
// to the checkpoint B resumed from, then B's - and in it every record is
// committed exactly once, with the right running total. A reader of the
// sink leaves the abandoned transactions out, as after a rollback.
func TestReplicationDrillLoseAResumeFromBExactlyOnce(t *testing.T) {
	srvA, srvB := miniotest.Start(t), miniotest.Start(t)
	bsA := openBucket(t, srvA, srvA.NewBucket(t))
	bsB := openBucket(t, srvB, srvB.NewBucket(t))
	out := openBucket(t, srvB, srvB.NewBucket(t)) // survives A
	sink := job.NewBlobSink(out, "")

	const n = 6000
	ctx, loseA := context.WithCancel(t.Context())
	defer loseA()
	srcA := newDrillJob(n)
	wait := startJob(ctx, drillConfig(t, bsA, sink, srcA))
	// The replicator reaches B over a link that fails just before A is
	// lost, so that B lags A by a few checkpoints when it happens.
	proxy := faultproxy.New(t, srvB.Endpoint)
	r := blobstorage.NewReplicator(bsA, proxiedStore(t, srvB, bsB.Bucket(), proxy.URL(), nil), blobstorage.ReplicateOptions{Interval: 100 * time.Millisecond, Keep: 3})
	runErr := make(chan error, 1)
	go func() { runErr <- r.Run(t.Context()) }()

	waitFor(t, 60*time.Second, "half the stream to be replicated", func() bool {
		cp, _ := blobstorage.New(bsB, "", blobstorage.Options{}).LoadLatestCompleted(t.Context())
		read := 0
		if cp != nil {
			read, _ = strconv.Atoi(string(cp.Offsets()))
		}
		return read >= n/2
	})
	proxy.Refuse(true)
	proxy.ResetAll()
	time.Sleep(2 * time.Second) // A goes on: four checkpoints or so
	rp := r.RecoveryPoint(time.Now())
	srvA.Kill(t) // A is gone: its store...
	loseA()      // ...and its node
	resA, errA := wait()
	proxy.Refuse(false)
	t.Logf("A lost after %d checkpoints (last %s), recovery point %v: %v", resA.Checkpoints, resA.Last, rp.Round(time.Millisecond), errA)

	cfgB := drillConfig(t, bsB, sink, newDrillJob(n))
	cfgB.Source.(*drillJob).pause = 0
	resB, err := job.Run(t.Context(), cfgB)
	if err != nil {
		t.Fatalf("the job resumed on B: %v", err)
	}
	select {
	case err := <-runErr:
		if !errors.Is(err, checkpoint.ErrFenced) {
			t.Fatalf("the replicator after the job took B over: %v, want ErrFenced", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the replicator still runs a minute after the job took B over")
	}
	if resB.Restored == "" {
		t.Fatal("the job on B started fresh: nothing had been replicated")
	}

	// The lineage: A's commits up to the checkpoint B resumed from, then
	// every commit of B's run.
	commits := readCommits(t, out)
	lineage := func(id string) bool { return id <= resB.Restored || commits[id] == resB.Writer }
	abandoned := 0
	for id := range commits {
		if !lineage(id) {
			abandoned++
		}
	}
	var got []job.Record
	for rec, err := range job.NewBlobSink(&commitView{Blobstore: out, keep: lineage}, "").Output(t.Context()) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, rec)
	}
	t.Logf("B resumed from %s; %d transactions of A after it abandoned (the recovery point's loss), %d committed by B", resB.Restored, abandoned, resB.Checkpoints)
	checkNumbersOnce(t, got, n)
	if abandoned == 0 || rp == 0 {
		t.Fatalf("B held A's latest checkpoint when A was lost (recovery point %v): the drill proves less than it claims", rp)
	}
}

// checkNumbersOnce checks that out holds 1…n, each once, in order, each
// with its running total.
func checkNumbersOnce(t *testing.T, out []job.Record, n int) {
	t.Helper()
	if len(out) != n {
		t.Errorf("the output holds %d records, want %d", len(out), n)
	}
	total := 0
	for i, r := range out {
		total += i + 1
		if string(r.Key) != strconv.Itoa(i+1) || string(r.Value) != strconv.Itoa(total) {
			t.Fatalf("output record %d is %s:%s, want %d:%d", i, r.Key, r.Value, i+1, total)
		}
	}
}

// readCommits returns the sink's committed checkpoint ids, each with the
// writer of the transaction it committed (BlobSink's commit/<id> names
// txn/<id>@<writer>).
func readCommits(t *testing.T, bs blobstore.Blobstore) map[string]string {
	t.Helper()
	out := map[string]string{}
	for info, err := range bs.List(t.Context(), "commit/") {
		if err != nil {
			t.Fatal(err)
		}
		rc, err := bs.Get(t.Context(), info.Key)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		f := strings.Fields(string(b))
		if len(f) != 4 {
			t.Fatalf("commit %s: %q", info.Key, b)
		}
		_, writer, _ := strings.Cut(f[2], "@")
		out[strings.TrimPrefix(info.Key, "commit/")] = writer
	}
	return out
}

// commitView lists only the commits keep accepts, so that BlobSink.Output
// reads one lineage.
type commitView struct {
	blobstore.Blobstore
	keep func(id string) bool
}

func (v *commitView) List(ctx context.Context, prefix string) iter.Seq2[blobstore.ObjectInfo, error] {
	return func(yield func(blobstore.ObjectInfo, error) bool) {
		for info, err := range v.Blobstore.List(ctx, prefix) {
			if err == nil && prefix == "commit/" && !v.keep(strings.TrimPrefix(info.Key, prefix)) {
				continue
			}
			if !yield(info, err) {
				return
			}
		}
	}
}

// testLogger logs to t at warning level and above.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
