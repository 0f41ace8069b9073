package jetstream_test

// Tests of the nats-server behaviour the sink relies on, against the real
// server at the pinned version, without the sink's code in the way.

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/tidemark-io/tidemark/integration/natstest"
)

type batchAck struct {
	Error *natsjs.APIError `json:"error"`
	Seq   uint64           `json:"seq"`
	Batch string           `json:"batch"`
	Count int              `json:"count"`
}

// rawBatch is an atomic batch in ADR-50 headers: a marker message with
// Nats-Expected-Last-Subject-Sequence: 0, then records.
type rawBatch struct {
	nc     *nats.Conn
	id     string
	seq    int
	marker string
}

func newRawBatch(nc *nats.Conn, marker string) *rawBatch {
	return &rawBatch{nc: nc, id: nuid.Next(), marker: marker}
}

func (b *rawBatch) msg(subject string, data []byte) *nats.Msg {
	b.seq++
	m := nats.NewMsg(subject)
	m.Data = data
	m.Header.Set("Nats-Batch-Id", b.id)
	m.Header.Set("Nats-Batch-Sequence", strconv.Itoa(b.seq))
	if b.seq == 1 && b.marker != "" {
		m.Header.Set("Nats-Expected-Last-Subject-Sequence", "0")
	}
	return m
}

// send publishes n-1 messages (the marker first) without committing.
func (b *rawBatch) send(t *testing.T, n int, subject string) {
	t.Helper()
	for i := range n {
		subj := subject
		if b.seq == 0 && b.marker != "" {
			subj = b.marker
		}
		if err := b.nc.PublishMsg(b.msg(subj, []byte("m"+strconv.Itoa(i)))); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// commit sends the last message with the commit header and returns the ack.
func (b *rawBatch) commit(t *testing.T, subject string) batchAck {
	t.Helper()
	m := b.msg(subject, []byte("last"))
	m.Header.Set("Nats-Batch-Commit", "1")
	reply, err := b.nc.RequestMsg(m, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var ack batchAck
	if err := json.Unmarshal(reply.Data, &ack); err != nil {
		t.Fatalf("ack %q: %v", reply.Data, err)
	}
	return ack
}

func atomicStream(t *testing.T, js natsjs.JetStream) natsjs.Stream {
	t.Helper()
	st, err := js.CreateStream(t.Context(), natsjs.StreamConfig{
		Name: "out", Subjects: []string{"out.>"}, Storage: natsjs.FileStorage, AllowAtomicPublish: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func msgs(t *testing.T, st natsjs.Stream) uint64 {
	t.Helper()
	info, err := st.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// TestServerMarkerRejectsSecondBatch: a batch whose first message expects
// an empty marker subject is stored whole once; the same batch again is
// rejected whole with error 10071 and stores nothing.
func TestServerMarkerRejectsSecondBatch(t *testing.T) {
	srv := natstest.Start(t)
	nc := srv.Connect(t)
	js, _ := natsjs.New(nc)
	st := atomicStream(t, js)

	b := newRawBatch(nc, "out.txn.c1.0")
	b.send(t, 4, "out.0")
	ack := b.commit(t, "out.0")
	if ack.Error != nil || ack.Count != 5 || ack.Batch != b.id {
		t.Fatalf("first batch: ack %+v, want 5 messages of batch %s stored", ack, b.id)
	}
	for range 3 {
		again := newRawBatch(nc, "out.txn.c1.0")
		again.send(t, 4, "out.0")
		ack := again.commit(t, "out.0")
		if ack.Error == nil || ack.Error.ErrorCode != 10071 {
			t.Fatalf("second batch on the same marker: ack %+v, want error 10071 (wrong last sequence)", ack)
		}
	}
	if n := msgs(t, st); n != 5 {
		t.Fatalf("stream holds %d messages, want the first batch's 5 only", n)
	}
}

// TestServerBatchInvisibleUntilCommit: messages of a batch not yet
// committed are not in the stream, and a consumer sees none; a batch whose
// publisher stops before the commit (a crash) never claims its marker.
func TestServerBatchInvisibleUntilCommit(t *testing.T) {
	srv := natstest.Start(t)
	nc := srv.Connect(t)
	js, _ := natsjs.New(nc)
	st := atomicStream(t, js)
	cons, err := st.OrderedConsumer(t.Context(), natsjs.OrderedConsumerConfig{FilterSubjects: []string{"out.*"}})
	if err != nil {
		t.Fatal(err)
	}

	open := newRawBatch(nc, "out.txn.c1.0")
	open.send(t, 50, "out.0")
	if n := msgs(t, st); n != 0 {
		t.Fatalf("uncommitted batch: stream holds %d messages, want 0", n)
	}
	got, err := cons.Fetch(100, natsjs.FetchMaxWait(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	for m := range got.Messages() {
		t.Fatalf("consumer saw %s before the commit", m.Subject())
	}

	// Another writer claims the marker while the first batch is open:
	// the open batch did not reserve it.
	other := newRawBatch(nc, "out.txn.c1.0")
	other.send(t, 2, "out.0")
	if ack := other.commit(t, "out.0"); ack.Error != nil || ack.Count != 3 {
		t.Fatalf("batch on a marker an uncommitted batch also names: ack %+v, want 3 stored", ack)
	}
	// The first batch's late commit is then rejected whole.
	if ack := open.commit(t, "out.0"); ack.Error == nil || ack.Error.ErrorCode != 10071 {
		t.Fatalf("late commit of the first batch: ack %+v, want error 10071", ack)
	}
	if n := msgs(t, st); n != 3 {
		t.Fatalf("stream holds %d messages, want 3", n)
	}
}

// TestServerBatchLimit: at v2.15.2 an atomic batch holds at most 1000
// messages by default, jetstream.limits.batch.max_msgs lowers it, and an
// oversized batch stores nothing.
func TestServerBatchLimit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  natstest.Options
		limit int
	}{
		{"default", natstest.Options{}, 1000},
		{"configured", natstest.Options{MaxBatch: 10}, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := natstest.Start(t, tc.opts)
			nc := srv.Connect(t)
			js, _ := natsjs.New(nc)
			st := atomicStream(t, js)
			full := newRawBatch(nc, "out.txn.a.0")
			full.send(t, tc.limit-1, "out.0")
			if ack := full.commit(t, "out.0"); ack.Error != nil || ack.Count != tc.limit {
				t.Fatalf("batch of %d: ack %+v, want stored", tc.limit, ack)
			}
			over := newRawBatch(nc, "out.txn.b.0")
			over.send(t, tc.limit, "out.0")
			if ack := over.commit(t, "out.0"); ack.Error == nil || ack.Error.ErrorCode != 10199 {
				t.Fatalf("batch of %d: ack %+v, want error 10199 (too large)", tc.limit+1, ack)
			}
			if n := msgs(t, st); n != uint64(tc.limit) {
				t.Fatalf("stream holds %d messages, want %d", n, tc.limit)
			}
		})
	}
}

// TestServerConcurrentBatchesOneMarker: of many batches racing for one
// marker subject exactly one is stored.
func TestServerConcurrentBatchesOneMarker(t *testing.T) {
	srv := natstest.Start(t)
	js, _ := natsjs.New(srv.Connect(t))
	st := atomicStream(t, js)
	const racers = 8
	acks := make(chan batchAck, racers)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for range racers {
		go func() {
			nc := srv.Connect(t) // each on its own connection
			b := newRawBatch(nc, "out.txn.c1.0")
			for i := range 20 {
				subj := "out.0"
				if i == 0 {
					subj = b.marker
				}
				_ = nc.PublishMsg(b.msg(subj, []byte{byte(i)}))
			}
			m := b.msg("out.0", []byte("last"))
			m.Header.Set("Nats-Batch-Commit", "1")
			var ack batchAck
			if reply, err := nc.RequestMsgWithContext(ctx, m); err != nil {
				ack.Error = &natsjs.APIError{Description: err.Error()}
			} else if err := json.Unmarshal(reply.Data, &ack); err != nil {
				ack.Error = &natsjs.APIError{Description: err.Error()}
			}
			acks <- ack
		}()
	}
	stored := 0
	for range racers {
		ack := <-acks
		switch {
		case ack.Error == nil:
			stored++
		case ack.Error.ErrorCode != 10071 && ack.Error.ErrorCode != 10164:
			t.Errorf("racer: unexpected error %v (code %d)", ack.Error, ack.Error.ErrorCode)
		}
	}
	if stored != 1 {
		t.Fatalf("%d batches stored, want exactly 1", stored)
	}
	if n := msgs(t, st); n != 21 {
		t.Fatalf("stream holds %d messages, want one batch's 21", n)
	}
}

// BenchmarkServerPublish prints what the server takes in messages/s of
// 40 bytes: plain asynchronous publishes, and atomic batches of 1000
// sent as the sink sends them (no reply until the commit), both into a
// file-stored R1 stream. It bounds what the sink's commit can reach.
//
//	go test -run '^$' -bench BenchmarkServerPublish -benchtime=1x ./connector/jetstream/
func BenchmarkServerPublish(b *testing.B) {
	const n = 100000
	srv := natstest.StartProcess(b)
	nc := srv.Connect(b)
	js, _ := natsjs.New(nc)
	if _, err := js.CreateStream(b.Context(), natsjs.StreamConfig{Name: "out", Subjects: []string{"out.>"}, Storage: natsjs.FileStorage, AllowAtomicPublish: true}); err != nil {
		b.Fatal(err)
	}
	data := make([]byte, 40)
	for i := 0; i < b.N; i++ {
		start := time.Now()
		for j := range n {
			if _, err := js.PublishAsync("out.plain", data); err != nil {
				b.Fatal(err)
			}
			if j%1000 == 999 {
				<-js.PublishAsyncComplete()
			}
		}
		<-js.PublishAsyncComplete()
		plain := float64(n) / time.Since(start).Seconds()

		start = time.Now()
		for k := range n / 1000 {
			id := nuid.Next()
			for j := 1; j <= 1000; j++ {
				m := nats.NewMsg("out.batch")
				m.Data = data
				m.Header.Set("Nats-Batch-Id", id)
				m.Header.Set("Nats-Batch-Sequence", strconv.Itoa(j))
				if j < 1000 {
					if err := nc.PublishMsg(m); err != nil {
						b.Fatal(err)
					}
					continue
				}
				m.Header.Set("Nats-Batch-Commit", "1")
				reply, err := nc.RequestMsg(m, 30*time.Second)
				if err != nil {
					b.Fatal(err)
				}
				var ack batchAck
				if err := json.Unmarshal(reply.Data, &ack); err != nil || ack.Error != nil {
					b.Fatalf("batch %d: %s %v", k, reply.Data, err)
				}
			}
		}
		batched := float64(n) / time.Since(start).Seconds()
		fmt.Printf("BenchmarkServerPublish: plain async %.0f msgs/s, atomic batches of 1000 %.0f msgs/s\n", plain, batched)
		b.ReportMetric(plain, "msgs/s-plain")
		b.ReportMetric(batched, "msgs/s-atomic")
	}
}
