package jetstream_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

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

func outputStreams(t *testing.T, srv *natstest.Server, name string) {
	t.Helper()
	if err := tmjs.CreateOutputStreams(t.Context(), srv.JetStream(t), name, 1); err != nil {
		t.Fatal(err)
	}
}

// readOutput returns every record on "<stream>.*" (markers excluded), as a
// consumer of the output would see them, in stream order.
func readOutput(t testing.TB, js natsjs.JetStream, stream string) []job.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := st.OrderedConsumer(ctx, natsjs.OrderedConsumerConfig{FilterSubjects: []string{stream + ".*"}})
	if err != nil {
		t.Fatal(err)
	}
	var out []job.Record
	for {
		b, err := cons.Fetch(500, natsjs.FetchMaxWait(200*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range b.Messages() {
			n++
			out = append(out, tmjs.RecordOf(t, m))
		}
		if err := b.Error(); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return out
		}
	}
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
