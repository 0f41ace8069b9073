package jetstream_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	tmjs "github.com/tidemark-io/tidemark/connector/jetstream"
	"github.com/tidemark-io/tidemark/integration/natstest"
	"github.com/tidemark-io/tidemark/job"
)

// records returns n records with distinct keys and values tagged by tag.
func records(tag string, from, n int) []job.Record {
	out := make([]job.Record, n)
	for i := range out {
		out[i] = job.Record{Key: fmt.Appendf(nil, "k%d", from+i), Value: fmt.Appendf(nil, "%s-%d", tag, from+i)}
	}
	return out
}

// newSink opens a sink on its own connection, as another node would.
func newSink(t *testing.T, srv *natstest.Server, cfg tmjs.SinkConfig) *tmjs.Sink {
	t.Helper()
	s, err := tmjs.NewSink(t.Context(), srv.JetStream(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// jobStreams creates the input stream "in" holding n records over parts
// partitions, and the output streams "out", each with replicas copies.
func jobStreams(t *testing.T, js natsjs.JetStream, parts, n, replicas int) {
	t.Helper()
	if _, err := tmjs.CreateInputStream(t.Context(), js, "in", replicas); err != nil {
		t.Fatal(err)
	}
	publishInput(t, js, parts, 0, n)
	if err := tmjs.CreateOutputStreams(t.Context(), js, "out", replicas); err != nil {
		t.Fatal(err)
	}
}

func outputStreams(t *testing.T, srv *natstest.Server, name string) {
	t.Helper()
	if err := tmjs.CreateOutputStreams(t.Context(), srv.JetStream(t), name, 1); err != nil {
		t.Fatal(err)
	}
}

// readOutput returns every record on "<stream>.*" (markers excluded), as a
// consumer of the output would see them, in stream order. It reads as many
// as the stream counts on those subjects, so a slow server cannot cut the
// read short.
func readOutput(t testing.TB, js natsjs.JetStream, stream string) []job.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	// Stream info and the pull requests may meet a stream leader election
	// or, on a cluster, a consumer whose interest has not yet reached the
	// node this client is connected to (503, no responders): retry them.
	var st natsjs.Stream
	var info *natsjs.StreamInfo
	if err := tmjs.Retry(ctx, func(rctx context.Context) error {
		var err error
		if st, err = js.Stream(rctx, stream); err != nil {
			return err
		}
		info, err = st.Info(rctx, natsjs.WithSubjectFilter(stream+".*"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, n := range info.State.Subjects {
		total += int(n)
	}
	out := make([]job.Record, 0, total)
	if total == 0 {
		return out
	}
	// Each Fetch of an ordered consumer creates a new consumer resuming
	// after the last message delivered, so a failed pull repeats nothing.
	var cons natsjs.Consumer
	if err := tmjs.Retry(ctx, func(rctx context.Context) error {
		var err error
		cons, err = st.OrderedConsumer(rctx, natsjs.OrderedConsumerConfig{FilterSubjects: []string{stream + ".*"}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for len(out) < total {
		b, err := cons.Fetch(min(total-len(out), 500), natsjs.FetchMaxWait(time.Second))
		if err == nil {
			for m := range b.Messages() {
				out = append(out, tmjs.RecordOf(t, m))
			}
			err = b.Error()
		}
		if ctx.Err() != nil {
			t.Fatalf("read %d of the %d records of %s.*: %v", len(out), total, stream, err)
		}
		if errors.Is(err, nats.ErrNoResponders) {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// sameRecords fails unless got is want, in order.
func sameRecords(t testing.TB, what string, got, want []job.Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d records, want %d", what, len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i].Key, want[i].Key) || !bytes.Equal(got[i].Value, want[i].Value) {
			t.Fatalf("%s: record %d is %q=%q, want %q=%q", what, i, got[i].Key, got[i].Value, want[i].Key, want[i].Value)
		}
	}
}
