package jetstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"testing"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	tmjs "github.com/tidemark-io/tidemark/connector/jetstream"
	"github.com/tidemark-io/tidemark/integration/natstest"
	"github.com/tidemark-io/tidemark/job"
)

// fillInput creates stream "in" with parts partitions and publishes n
// records round-robin; it returns each partition's records in order.
func fillInput(t *testing.T, js natsjs.JetStream, parts, n int) map[int][]job.Record {
	t.Helper()
	ctx := t.Context()
	if _, err := tmjs.CreateInputStream(ctx, js, "in", 1); err != nil {
		t.Fatal(err)
	}
	return publishInput(t, js, parts, 0, n)
}

func publishInput(t testing.TB, js natsjs.JetStream, parts, from, n int) map[int][]job.Record {
	t.Helper()
	ctx := t.Context()
	out := map[int][]job.Record{}
	var futures []natsjs.PubAckFuture
	for i := from; i < from+n; i++ {
		p := i % parts
		r := job.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)}
		f, err := js.PublishMsgAsync(tmjs.NewMsg(tmjs.PartitionSubject("in", p), r))
		if err != nil {
			t.Fatal(err)
		}
		futures = append(futures, f)
		out[p] = append(out[p], r)
		// A window of acknowledgements: nats.go refuses too many pending.
		if len(futures) == 1000 || i == from+n-1 {
			for _, f := range futures {
				select {
				case <-f.Ok():
				case err := <-f.Err():
					t.Fatal(err)
				case <-ctx.Done():
					t.Fatal(ctx.Err())
				}
			}
			futures = futures[:0]
		}
	}
	return out
}

func newSource(t *testing.T, js natsjs.JetStream, cfg tmjs.SourceConfig, offsets []byte) *tmjs.Source {
	t.Helper()
	s, err := tmjs.NewSource(js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Seek(t.Context(), offsets); err != nil {
		t.Fatal(err)
	}
	return s
}

// byPartition files records by the partition their key's number maps to.
func byPartition(t *testing.T, recs []job.Record, parts int) map[int][]job.Record {
	t.Helper()
	out := map[int][]job.Record{}
	for _, r := range recs {
		i, err := strconv.Atoi(string(r.Key[1:]))
		if err != nil {
			t.Fatalf("key %q", r.Key)
		}
		out[i%parts] = append(out[i%parts], r)
	}
	return out
}

// readUntil calls Next until it has n records or io.EOF, checking the
// batch bounds.
func readUntil(t *testing.T, s *tmjs.Source, n, maxRecs int) ([]job.Record, error) {
	t.Helper()
	// Generous: after a node's death the client recreates a consumer
	// with backoff (1s, 2s, 4s…) while the cluster elects.
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	var out []job.Record
	for len(out) < n {
		b, err := s.Next(ctx)
		if err != nil {
			return out, err
		}
		if len(b) > maxRecs {
			t.Fatalf("batch of %d records, bound %d", len(b), maxRecs)
		}
		out = append(out, b...)
	}
	return out, nil
}

// TestSourceResumesEachPartitionAfterItsOffset: a source of partitions 0
// and 2 out of 3 reads some batches; a new source seeked to its offsets
// reads the rest. Together they read each record of those partitions
// exactly once, in partition order, and none of partition 1.
func TestSourceResumesEachPartitionAfterItsOffset(t *testing.T) {
	srv := natstest.Start(t)
	js := srv.JetStream(t)
	want := fillInput(t, js, 3, 300)
	cfg := tmjs.SourceConfig{Stream: "in", Partitions: []int{2, 0}, MaxRecords: 7}
	first := newSource(t, js, cfg, nil)
	got, err := readUntil(t, first, 90, 7)
	if err != nil {
		t.Fatal(err)
	}
	off, err := first.Offsets()
	if err != nil {
		t.Fatal(err)
	}
	var o tmjs.Offsets
	if err := json.Unmarshal(off, &o); err != nil || o.Stream != "in" || len(o.Partitions) != 2 {
		t.Fatalf("offsets %s (%v): want stream in and partitions 0 and 2", off, err)
	}
	first.Close()

	second := newSource(t, js, cfg, off)
	rest, err := readUntil(t, second, 200-len(got), 7)
	if err != nil {
		t.Fatal(err)
	}
	all := byPartition(t, append(got, rest...), 3)
	if len(all[1]) != 0 {
		t.Fatalf("read %d records of partition 1, which the source does not own", len(all[1]))
	}
	for _, p := range []int{0, 2} {
		sameRecords(t, "partition "+strconv.Itoa(p), all[p], want[p])
	}
	// Nothing more: an empty batch, not a duplicate.
	if b, err := second.Next(t.Context()); err != nil || len(b) != 0 {
		t.Fatalf("Next at the end: %d records, %v; want an empty batch", len(b), err)
	}
}

// TestSourceStopAtEnd: a bounded source reads what the partitions held at
// Seek and then returns io.EOF, ignoring what is published later.
func TestSourceStopAtEnd(t *testing.T) {
	srv := natstest.Start(t)
	js := srv.JetStream(t)
	want := fillInput(t, js, 2, 100)
	s := newSource(t, js, tmjs.SourceConfig{Stream: "in", Partitions: []int{0, 1}, StopAtEnd: true}, nil)
	publishInput(t, js, 2, 100, 50)
	got, err := readUntil(t, s, 1000, 1000)
	if !errors.Is(err, io.EOF) {
		t.Fatalf("read %d records, then %v; want io.EOF", len(got), err)
	}
	all := byPartition(t, got, 2)
	for p := range 2 {
		sameRecords(t, "partition "+strconv.Itoa(p), all[p], want[p])
	}
	// Resuming at the end of a bounded run is io.EOF at once, even though
	// the stream has grown since: the bound is fixed at Seek.
	off, _ := s.Offsets()
	again := newSource(t, js, tmjs.SourceConfig{Stream: "in", Partitions: []int{0}, StopAtEnd: true}, off)
	b, err := readUntil(t, again, 1000, 1000)
	if len(b) != 25 || !errors.Is(err, io.EOF) {
		t.Fatalf("second bounded run: %d records, %v; want partition 0's 25 new ones then io.EOF", len(b), err)
	}
}

// TestSourceBatchBounds: batches respect MaxBytes; with nothing to read,
// Next returns an empty batch after about Wait.
func TestSourceBatchBounds(t *testing.T) {
	srv := natstest.Start(t)
	js := srv.JetStream(t)
	fillInput(t, js, 1, 50) // records of 5-6 bytes
	s := newSource(t, js, tmjs.SourceConfig{Stream: "in", Partitions: []int{0}, MaxBytes: 40, Wait: 50 * time.Millisecond}, nil)
	n := 0
	for n < 50 {
		b, err := s.Next(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		size := 0
		for _, r := range b {
			size += len(r.Key) + len(r.Value)
		}
		if size > 40 {
			t.Fatalf("batch of %d bytes, bound 40", size)
		}
		n += len(b)
	}
	start := time.Now()
	b, err := s.Next(t.Context())
	if err != nil || len(b) != 0 {
		t.Fatalf("Next with nothing to read: %d records, %v", len(b), err)
	}
	if d := time.Since(start); d < 40*time.Millisecond {
		t.Fatalf("empty batch after %v, want about the 50ms wait", d)
	}
}

// TestSourceSurvivesServerRestart: the server is killed and restarted in
// the middle of a read; the source goes on with nothing lost or repeated.
func TestSourceSurvivesServerRestart(t *testing.T) {
	srv := natstest.Start(t)
	js := srv.JetStream(t)
	want := fillInput(t, js, 2, 200)
	s := newSource(t, js, tmjs.SourceConfig{Stream: "in", Partitions: []int{0, 1}, MaxRecords: 10, InFlight: 10}, nil)
	got, err := readUntil(t, s, 50, 10)
	if err != nil {
		t.Fatal(err)
	}
	srv.Kill(t)
	srv.Restart(t)
	rest, err := readUntil(t, s, 200-len(got), 10)
	if err != nil {
		t.Fatal(err)
	}
	all := byPartition(t, append(got, rest...), 2)
	for p := range 2 {
		sameRecords(t, "partition "+strconv.Itoa(p), all[p], want[p])
	}
}

// TestSourceRefusesBadOffsets: offsets of another stream, or offsets the
// stream no longer holds the continuation of, fail Seek clearly.
func TestSourceRefusesBadOffsets(t *testing.T) {
	srv := natstest.Start(t)
	js := srv.JetStream(t)
	fillInput(t, js, 1, 20)
	cfg := tmjs.SourceConfig{Stream: "in", Partitions: []int{0}}
	for _, tc := range []struct {
		off  string
		want error
	}{
		{`{"stream":"other","partitions":{"0":3}}`, tmjs.ErrOffsets},
		{`not json`, tmjs.ErrOffsets},
		{`{"stream":"in","partitions":{"x":3}}`, tmjs.ErrOffsets},
	} {
		s, err := tmjs.NewSource(js, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Seek(t.Context(), []byte(tc.off)); !errors.Is(err, tc.want) {
			t.Errorf("Seek(%s): %v, want %v", tc.off, err, tc.want)
		}
	}
	st, err := js.Stream(t.Context(), "in")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(t.Context(), natsjs.WithPurgeSequence(11)); err != nil {
		t.Fatal(err)
	}
	s, err := tmjs.NewSource(js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Seek(t.Context(), []byte(`{"stream":"in","partitions":{"0":5}}`)); !errors.Is(err, tmjs.ErrTruncated) {
		t.Fatalf("Seek after 5 when the stream starts at 11: %v, want ErrTruncated", err)
	}
	for _, bad := range [][]int{nil, {-1}, {0, 0}} {
		if _, err := tmjs.NewSource(js, tmjs.SourceConfig{Stream: "in", Partitions: bad}); !errors.Is(err, tmjs.ErrConfig) {
			t.Errorf("partitions %v: %v, want ErrConfig", bad, err)
		}
	}
}

// TestSourceReplacesStalledConsumer: a partition whose consumer stops
// delivering while the stream holds more is given a new consumer after
// StallAfter, which resumes after the last record returned: nothing lost
// or repeated.
func TestSourceReplacesStalledConsumer(t *testing.T) {
	srv := natstest.Start(t)
	js := srv.JetStream(t)
	want := fillInput(t, js, 2, 200)
	s := newSource(t, js, tmjs.SourceConfig{
		Stream: "in", Partitions: []int{0, 1}, MaxRecords: 10, InFlight: 5,
		Wait: 20 * time.Millisecond, StallAfter: 200 * time.Millisecond, StopAtEnd: true,
	}, nil)
	got, err := readUntil(t, s, 30, 10)
	if err != nil {
		t.Fatal(err)
	}
	tmjs.StallPartition(s, 0)
	tmjs.StallPartition(s, 1)
	rest, err := readUntil(t, s, 1000, 10)
	if !errors.Is(err, io.EOF) {
		t.Fatalf("after the stall: %d records, then %v; want io.EOF", len(rest), err)
	}
	all := byPartition(t, append(got, rest...), 2)
	for p := range 2 {
		sameRecords(t, "partition "+strconv.Itoa(p), all[p], want[p])
	}
}
