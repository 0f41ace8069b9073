package jetstream_test

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	tmjs "github.com/tidemark-io/tidemark/connector/jetstream"
	"github.com/tidemark-io/tidemark/integration/natstest"
	"github.com/tidemark-io/tidemark/job"
)

// Replicated streams take another path through the server (atomic batches
// are proposed through Raft), so the guarantees are checked again on a
// 3-node cluster with streams of 3 replicas, with a node killed.

// leaderNode returns the cluster node leading stream name.
func leaderNode(t *testing.T, c *natstest.Cluster, js natsjs.JetStream, name string) *natstest.Server {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		st, err := js.Stream(t.Context(), name)
		if err == nil && st.CachedInfo().Cluster != nil && st.CachedInfo().Cluster.Leader != "" {
			leader := st.CachedInfo().Cluster.Leader // "n<i>"
			i, err := strconv.Atoi(strings.TrimPrefix(leader, "n"))
			if err != nil || i < 1 || i > len(c.Nodes) {
				t.Fatalf("stream %s: leader %q", name, leader)
			}
			return c.Nodes[i-1]
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("stream %s has no leader", name)
	return nil
}

// TestClusterServerMarkerR3: on a 3-replica stream a batch guarded by its
// marker is stored once; repeats and racers are rejected whole.
func TestClusterServerMarkerR3(t *testing.T) {
	c := natstest.StartCluster(t, 3)
	nc := c.Connect(t)
	js, _ := natsjs.New(nc)
	st, err := js.CreateStream(t.Context(), natsjs.StreamConfig{
		Name: "out", Subjects: []string{"out.>"}, Storage: natsjs.FileStorage, Replicas: 3, AllowAtomicPublish: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	b := newRawBatch(nc, "out.txn.c1.0")
	b.send(t, 9, "out.0")
	if ack := b.commit(t, "out.0"); ack.Error != nil || ack.Count != 10 {
		t.Fatalf("first batch: ack %+v, want 10 stored", ack)
	}
	var wg sync.WaitGroup
	acks := make([]batchAck, 4)
	for i := range acks {
		wg.Go(func() {
			r := newRawBatch(c.Connect(t), "out.txn.c1.0")
			r.send(t, 9, "out.0")
			acks[i] = r.commit(t, "out.0")
		})
	}
	wg.Wait()
	for i, ack := range acks {
		if ack.Error == nil || (ack.Error.ErrorCode != 10071 && ack.Error.ErrorCode != 10164) {
			t.Errorf("repeat %d: ack %+v, want rejected (10071 or 10164)", i, ack)
		}
	}
	if n := msgs(t, st); n != 10 {
		t.Fatalf("stream holds %d messages, want the first batch's 10", n)
	}
}

// TestClusterSinkSurvivesLeaderKill: a txn prepared on 3-replica streams
// is committed after the leader of the output stream is killed, from
// another connection, twice; the output holds it once. The killed node
// comes back and the output is the same through it.
func TestClusterSinkSurvivesLeaderKill(t *testing.T) {
	c := natstest.StartCluster(t, 3, natstest.Options{MaxBatch: 10})
	js := c.JetStream(t)
	ctx := t.Context()
	if err := tmjs.CreateOutputStreams(ctx, js, "out", 3); err != nil {
		t.Fatal(err)
	}
	cfg := tmjs.SinkConfig{Stream: "out", MaxBatch: 10, Partitions: 2}
	w, err := tmjs.NewSink(ctx, js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	txn := job.Txn{ID: "ckpt-00000000000000000001", Writer: "e1"}
	want := records("r3", 0, 45) // 5 chunks
	if err := w.Write(ctx, txn, want); err != nil {
		t.Fatal(err)
	}
	if err := w.Prepare(ctx, txn); err != nil {
		t.Fatal(err)
	}
	if err := tmjs.CommitPartly(ctx, w, txn, 2); err != nil {
		t.Fatal(err)
	}
	leader := leaderNode(t, c, js, "out")
	leader.Kill(t)

	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	// The first attempts may meet the election: retry as a recovering
	// node would.
	ojs := c.JetStream(t)
	var other *tmjs.Sink
	for {
		// Each attempt has its own deadline: a request lost in the
		// election would otherwise wait for the whole minute.
		actx, acancel := context.WithTimeout(cctx, 5*time.Second)
		if other == nil {
			other, err = tmjs.NewSink(actx, ojs, cfg)
		}
		if other != nil {
			err = other.Commit(actx, txn)
		}
		acancel()
		if err == nil {
			break
		}
		t.Logf("commit after the leader's kill: %v; retrying", err)
		if cctx.Err() != nil {
			t.Fatalf("commit after the leader's kill: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := other.Commit(ctx, txn); err != nil {
		t.Fatal(err)
	}
	sameRecords(t, "after the leader's kill", readOutput(t, c.JetStream(t), "out"), want)

	t.Log("committed after the leader's kill")
	leader.Restart(t)
	t.Log("restarted")
	js2, err := natsjs.New(leader.Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(ctx, txn); err != nil {
		t.Fatalf("the first writer's late commit: %v", err)
	}
	sameRecords(t, "through the restarted node", readOutput(t, js2, "out"), want)
}

// TestClusterSourceSurvivesNodeKill: a source on a 3-replica input reads
// every record once while the input's leader is killed mid-read.
func TestClusterSourceSurvivesNodeKill(t *testing.T) {
	c := natstest.StartCluster(t, 3)
	js := c.JetStream(t)
	if _, err := tmjs.CreateInputStream(t.Context(), js, "in", 3); err != nil {
		t.Fatal(err)
	}
	want := publishInput(t, js, 2, 0, 400)
	s, err := tmjs.NewSource(c.JetStream(t), tmjs.SourceConfig{Stream: "in", Partitions: []int{0, 1}, MaxRecords: 10, InFlight: 10, StopAtEnd: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Seek(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	got, err := readUntil(t, s, 100, 10)
	if err != nil {
		t.Fatal(err)
	}
	leaderNode(t, c, js, "in").Kill(t)
	rest, err := readUntil(t, s, 1000, 10)
	if !errors.Is(err, io.EOF) {
		t.Fatalf("read %d more, then %v; want io.EOF", len(rest), err)
	}
	all := byPartition(t, append(got, rest...), 2)
	for p := range 2 {
		sameRecords(t, "partition "+strconv.Itoa(p), all[p], want[p])
	}
}
