package jetstream_test

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/tidemark-io/tidemark/blobstorage"
	tmjs "github.com/tidemark-io/tidemark/connector/jetstream"
	"github.com/tidemark-io/tidemark/filestore"
	"github.com/tidemark-io/tidemark/integration/jsjob/totals"
	"github.com/tidemark-io/tidemark/integration/natstest"
	"github.com/tidemark-io/tidemark/job"
)

// checkTotals checks that the output holds each input number once, per
// partition in input order, with the running total a single uninterrupted
// run would have computed.
func checkTotals(t testing.TB, out []job.Record, parts, n int) {
	t.Helper()
	next := make([]int, parts) // next number expected per partition
	sums := make([]int, parts) // running total per partition
	for p := range parts {
		next[p] = p
	}
	for _, r := range out {
		f := strings.Split(string(r.Value), ":")
		if len(f) != 3 {
			t.Fatalf("output %q", r.Value)
		}
		p, _ := strconv.Atoi(f[0])
		num, _ := strconv.Atoi(f[1])
		total, _ := strconv.Atoi(f[2])
		if p < 0 || p >= parts || num != next[p] {
			t.Fatalf("output %q: partition %d expected number %d next (a duplicate or a gap)", r.Value, p, next[p])
		}
		sums[p] += num
		if total != sums[p] {
			t.Fatalf("output %q: running total %d, want %d (state and output disagree)", r.Value, total, sums[p])
		}
		next[p] += parts
	}
	for p := range parts {
		if next[p] < n {
			t.Fatalf("partition %d: output stops before %d (lost records)", p, next[p])
		}
	}
}

// jsNode is a server or a cluster: where a node of the job connects.
type jsNode interface {
	JetStream(t testing.TB) natsjs.JetStream
}

// runJob runs the totals.Job job from JetStream stream "in" to
// stream "out" on a fresh node (its own connection and an empty disk),
// checkpointing into bucketDir. die, if set, cancels the run once it has
// read that many records; onCheckpoint, if set, runs (on the job's
// goroutine) when the first checkpoint completes.
func runJob(t *testing.T, srv jsNode, bucketDir string, parts int, die uint64, onCheckpoint func()) (job.Result, error) {
	t.Helper()
	js := srv.JetStream(t)
	bucket, err := filestore.New(bucketDir)
	if err != nil {
		t.Fatal(err)
	}
	all := make([]int, parts)
	for p := range all {
		all[p] = p
	}
	src, err := tmjs.NewSource(js, tmjs.SourceConfig{Stream: "in", Partitions: all, MaxRecords: 100, StopAtEnd: true})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	sink, err := tmjs.NewSink(t.Context(), js, tmjs.SinkConfig{Stream: "out", Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	disk := t.TempDir()
	completed := false
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	return job.Run(ctx, job.Config{
		Storage:      blobstorage.New(bucket, filepath.Join(disk, "checkpoints"), blobstorage.Options{}),
		Dir:          disk,
		Source:       src,
		Processor:    totals.Job{Parts: parts},
		Sink:         sink,
		Interval:     time.Second,
		EveryRecords: 250,
		Observe: func(e job.Event) {
			// Die only once a checkpoint completed, however slow the
			// machine: the resume must restore something.
			if e.Kind == "checkpoint" {
				if !completed && onCheckpoint != nil {
					onCheckpoint()
				}
				completed = true
			}
			if die > 0 && completed && e.Records >= die {
				cancel()
			}
		},
	})
}

// TestJobJetStreamExactlyOnce: JetStream in, job.Run, JetStream out. The
// first node dies mid-stream; the NATS server is then killed and
// restarted; a second node with an empty disk resumes from the checkpoint
// and runs to the end of the input. A consumer of the output stream sees
// each input's effect exactly once.
//
// It runs on the server as a process, in process (embedded), and as a
// container where a Docker daemon answers.
func TestJobJetStreamExactlyOnce(t *testing.T) {
	t.Run("process", func(t *testing.T) { jobExactlyOnce(t, natstest.StartProcess(t)) })
	t.Run("embedded", func(t *testing.T) { jobExactlyOnce(t, natstest.StartEmbedded(t)) })
	t.Run("docker", func(t *testing.T) {
		if err := natstest.DockerAvailable(t.Context()); err != nil {
			t.Skipf("SKIPPED LOUDLY: no Docker daemon answers (%v): the job on a nats-server container is NOT tested", err)
		}
		jobExactlyOnce(t, natstest.StartDocker(t))
	})
}

func jobExactlyOnce(t *testing.T, srv *natstest.Server) {
	const parts, n = 3, 3000
	js := srv.JetStream(t)
	jobStreams(t, js, parts, n, 1)
	bucketDir := t.TempDir()

	res, err := runJob(t, srv, bucketDir, parts, 1200, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("first node: %v (%+v), want it killed mid-stream (context canceled)", err, res)
	}
	if res.Checkpoints == 0 {
		t.Fatalf("first node completed no checkpoint before it died: %+v", res)
	}
	partial := readOutput(t, js, "out")
	if len(partial) == 0 || len(partial) >= n {
		t.Fatalf("after the first node: %d records out, want some but not all", len(partial))
	}
	checkTotals(t, partial, parts, 0)

	srv.Kill(t)
	srv.Restart(t)

	res, err = runJob(t, srv, bucketDir, parts, 0, nil)
	if err != nil {
		t.Fatalf("second node: %v", err)
	}
	if res.Restored == "" {
		t.Fatalf("second node restored nothing: %+v", res)
	}
	out := readOutput(t, srv.JetStream(t), "out")
	if len(out) != n {
		t.Fatalf("output holds %d records, want %d", len(out), n)
	}
	checkTotals(t, out, parts, n)
	t.Logf("output %d records before the kill; the second node restored %s and read %d", len(partial), res.Restored, res.Records)
}

// TestJobJetStreamClusterNodeKill: the job on a 3-node cluster, input and
// output with 3 replicas. When the first checkpoint completes the output
// stream's leader is killed; the job goes on through the election (or
// fails), and dies at 1200 records. A second node with an empty disk
// resumes with that NATS node still down and runs to the end: each
// input's effect once.
func TestJobJetStreamClusterNodeKill(t *testing.T) {
	const parts, n = 3, 3000
	c := natstest.StartCluster(t, 3)
	js := c.JetStream(t)
	jobStreams(t, js, parts, n, 3)
	bucketDir := t.TempDir()
	killed := false
	res, err := runJob(t, c, bucketDir, parts, 1200, func() {
		leaderNode(t, c, js, "out").Kill(t)
		killed = true
	})
	if !killed {
		t.Fatalf("first node: %v (%+v): it completed no checkpoint, so no NATS node was killed", err, res)
	}
	if err == nil {
		t.Fatalf("first node ran to the end (%+v), want it killed mid-stream", res)
	}
	t.Logf("first node: %v after %d records, %d checkpoints", err, res.Records, res.Checkpoints)

	res, err = runJob(t, c, bucketDir, parts, 0, nil)
	if err != nil {
		t.Fatalf("second node: %v", err)
	}
	out := readOutput(t, c.JetStream(t), "out")
	if len(out) != n {
		t.Fatalf("output holds %d records, want %d", len(out), n)
	}
	checkTotals(t, out, parts, n)
}
