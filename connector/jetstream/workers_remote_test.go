package jetstream_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstorage"
	tmjs "github.com/tidemark-io/tidemark/connector/jetstream"
	"github.com/tidemark-io/tidemark/integration/natstest"
	"github.com/tidemark-io/tidemark/job"
)

// remoteWorker is rescaleWorker with the state in remote mode.
func (j *workerJob) remoteWorker(slot string, partitions []int, owners []string) *run {
	ctx, cancel := context.WithTimeout(j.t.Context(), 3*time.Minute)
	r := &run{cancel: cancel, done: make(chan struct{})}
	g := j.group(ctx)
	sink, err := j.sink(ctx, slot)
	if err != nil {
		j.t.Fatal(err)
	}
	js := j.srv.JetStream(j.t)
	go func() {
		defer close(r.done)
		r.res, r.err = job.RunWorker(ctx, job.WorkerConfig{
			Group: g, Slot: slot, Blobstore: j.bucket(), Dir: j.t.TempDir(),
			Source: func(context.Context) (job.Source, error) {
				return tmjs.NewSource(js, tmjs.SourceConfig{Stream: "in", Partitions: partitions, MaxRecords: 20, StopAtEnd: true})
			},
			Processor:   ownerPerPartition{parts: j.parts},
			Sink:        sink,
			Owners:      owners,
			RemoteState: "all",
		})
	}()
	return r
}

// TestWorkersRescaleRemoteState: TestWorkersRescale's job with its state
// in remote mode, over a real NATS Group. Two workers crash with their
// coordinator after two checkpoints whose tables are in the store; the
// job resumes with three, each opening the owners it declares in place.
// The output stream holds each input's effect once.
func TestWorkersRescaleRemoteState(t *testing.T) {
	srv := natstest.StartEmbedded(t)
	const parts, n = 4, 4000
	js := srv.JetStream(t)
	if _, err := tmjs.CreateInputStream(t.Context(), js, "in", 1); err != nil {
		t.Fatal(err)
	}
	publishInput(t, js, parts, 0, n)
	if err := tmjs.CreateOutputStreams(t.Context(), js, "out", 1); err != nil {
		t.Fatal(err)
	}
	j := &workerJob{t: t, srv: srv, bucketDir: t.TempDir(), parts: parts, slots: []string{"w0", "w1"}}
	var completed atomic.Int64
	c := j.coordinator(func(e job.Event) {
		if e.Kind == "checkpoint" {
			completed.Add(1)
		}
	}, nil)
	ws := []*run{
		j.remoteWorker("w0", []int{0, 2}, []string{"t0", "t2"}),
		j.remoteWorker("w1", []int{1, 3}, []string{"t1", "t3"}),
	}
	waitFor(t, "two checkpoints", func() bool { return completed.Load() >= 2 })
	for _, r := range append(ws, c) {
		r.cancel()
		r.wait(t, "a node of the first run")
	}
	tables := 0
	for info, err := range j.bucket().List(t.Context(), blobstorage.RemotePrefix+"/") {
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(info.Key, ".sst") {
			tables++
		}
	}
	if tables == 0 {
		t.Fatal("the first run left no table in the store: nothing to open in place")
	}

	j.slots = []string{"a", "b", "c"}
	c = j.coordinator(nil, nil)
	ws = []*run{
		j.remoteWorker("a", []int{0}, []string{"t0"}),
		j.remoteWorker("b", []int{1, 2}, []string{"t1", "t2"}),
		j.remoteWorker("c", []int{3}, []string{"t3"}),
	}
	res, err := c.wait(t, "the coordinator over three workers")
	if err != nil {
		t.Fatalf("coordinator: %v", err)
	}
	if res.Restored == "" {
		t.Fatalf("the rescaled job restored nothing: %+v", res)
	}
	for _, r := range ws {
		if _, err := r.wait(t, "a worker"); err != nil {
			t.Fatalf("worker: %v", err)
		}
	}
	out := readOutput(t, js, "out")
	if len(out) != n {
		t.Fatalf("output holds %d records, want %d", len(out), n)
	}
	checkTotals(t, out, parts, n)
}
