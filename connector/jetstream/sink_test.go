package jetstream_test

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	tmjs "github.com/tidemark-io/tidemark/connector/jetstream"
	"github.com/tidemark-io/tidemark/integration/natstest"
	"github.com/tidemark-io/tidemark/job"
)

// TestSinkInvisibleUntilCommitAndRetriedOnce: nothing of a txn is on the
// output subjects after Write and Prepare; Commit publishes it; Commit
// called again (a retry, a lost reply) publishes nothing more.
func TestSinkInvisibleUntilCommitAndRetriedOnce(t *testing.T) {
	srv := natstest.Start(t)
	outputStreams(t, srv, "out")
	js := srv.JetStream(t)
	s := newSink(t, srv, tmjs.SinkConfig{Stream: "out", Partitions: 3})
	ctx := t.Context()
	txn := job.Txn{ID: "ckpt-00000000000000000001", Writer: "e1"}
	want := records("a", 0, 40)
	if err := s.Write(ctx, txn, want[:25]); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, txn, want[25:]); err != nil {
		t.Fatal(err)
	}
	if got := readOutput(t, js, "out"); len(got) != 0 {
		t.Fatalf("after Write: %d records visible, want none", len(got))
	}
	if err := s.Prepare(ctx, txn); err != nil {
		t.Fatal(err)
	}
	if got := readOutput(t, js, "out"); len(got) != 0 {
		t.Fatalf("after Prepare: %d records visible, want none", len(got))
	}
	for i := range 5 {
		if err := s.Commit(ctx, txn); err != nil {
			t.Fatalf("commit %d: %v", i+1, err)
		}
	}
	got := readOutput(t, js, "out")
	// Records are spread over 3 subjects but one stream: stream order is
	// write order.
	sameRecords(t, "after 5 commits", got, want)
}

// TestSinkCommitOnAnotherNodeAfterServerRestart: a prepared txn is
// durable: the server is killed and restarted, the writer is gone, and a
// sink on another connection commits it.
func TestSinkCommitOnAnotherNodeAfterServerRestart(t *testing.T) {
	srv := natstest.Start(t)
	outputStreams(t, srv, "out")
	ctx := t.Context()
	txn := job.Txn{ID: "ckpt-00000000000000000007", Writer: "e2"}
	want := records("b", 0, 30)
	w := newSink(t, srv, tmjs.SinkConfig{Stream: "out"})
	if err := w.Write(ctx, txn, want); err != nil {
		t.Fatal(err)
	}
	if err := w.Prepare(ctx, txn); err != nil {
		t.Fatal(err)
	}
	srv.Kill(t)
	srv.Restart(t)
	other := newSink(t, srv, tmjs.SinkConfig{Stream: "out"})
	if err := other.Commit(ctx, txn); err != nil {
		t.Fatal(err)
	}
	if err := other.Commit(ctx, txn); err != nil {
		t.Fatal(err)
	}
	sameRecords(t, "committed on another node", readOutput(t, srv.JetStream(t), "out"), want)
}

// TestSinkConcurrentCommitsPublishOnce: many nodes commit one txn at
// once, in chunks (the server allows 10 messages per batch here); every
// call succeeds and each record is published once.
func TestSinkConcurrentCommitsPublishOnce(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{MaxBatch: 10})
	outputStreams(t, srv, "out")
	ctx := t.Context()
	cfg := tmjs.SinkConfig{Stream: "out", MaxBatch: 10}
	txn := job.Txn{ID: "ckpt-00000000000000000003", Writer: "e1"}
	want := records("c", 0, 95) // 11 chunks of at most 9 records
	w := newSink(t, srv, cfg)
	if err := w.Write(ctx, txn, want); err != nil {
		t.Fatal(err)
	}
	if err := w.Prepare(ctx, txn); err != nil {
		t.Fatal(err)
	}
	const nodes = 6
	sinks := make([]*tmjs.Sink, nodes)
	for i := range sinks {
		sinks[i] = newSink(t, srv, cfg)
	}
	var wg sync.WaitGroup
	errs := make([]error, nodes)
	for i, s := range sinks {
		wg.Go(func() { errs[i] = s.Commit(ctx, txn) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("node %d: %v", i, err)
		}
	}
	sameRecords(t, "after concurrent commits", readOutput(t, srv.JetStream(t), "out"), want)
}

// TestSinkCommitResumesAfterCrashMidCommit: a commit that stopped after
// some chunks (a crash) is finished by the next call, which publishes
// only the missing chunks.
func TestSinkCommitResumesAfterCrashMidCommit(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{MaxBatch: 10})
	outputStreams(t, srv, "out")
	ctx := t.Context()
	cfg := tmjs.SinkConfig{Stream: "out", MaxBatch: 10}
	txn := job.Txn{ID: "ckpt-00000000000000000004", Writer: "e1"}
	want := records("d", 0, 35) // 4 chunks
	s := newSink(t, srv, cfg)
	if err := s.Write(ctx, txn, want); err != nil {
		t.Fatal(err)
	}
	if err := s.Prepare(ctx, txn); err != nil {
		t.Fatal(err)
	}
	if err := tmjs.CommitPartly(ctx, s, txn, 2); err != nil {
		t.Fatal(err)
	}
	js := srv.JetStream(t)
	sameRecords(t, "after 2 of 4 chunks", readOutput(t, js, "out"), want[:18])
	if err := newSink(t, srv, cfg).Commit(ctx, txn); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, txn); err != nil {
		t.Fatal(err)
	}
	sameRecords(t, "after the commit resumed", readOutput(t, js, "out"), want)
}

// TestSinkZombieCommitsNothingNew: a zombie (writer e1) wakes after the
// takeover by e2. Its late commit of the txn e2 rolled forward succeeds and
// publishes nothing; its commit of a checkpoint id that e2 committed with
// its own txn is refused (ErrTxnConflict) and publishes nothing.
func TestSinkZombieCommitsNothingNew(t *testing.T) {
	srv := natstest.Start(t)
	outputStreams(t, srv, "out")
	ctx := t.Context()
	cfg := tmjs.SinkConfig{Stream: "out"}
	zombie, successor := newSink(t, srv, cfg), newSink(t, srv, cfg)
	prepared := job.Txn{ID: "ckpt-00000000000000000005", Writer: "e1"}
	lost := job.Txn{ID: "ckpt-00000000000000000006", Writer: "e1"}
	redo := job.Txn{ID: "ckpt-00000000000000000006", Writer: "e2"}
	for _, tx := range []struct {
		txn  job.Txn
		recs []job.Record
	}{{prepared, records("z5", 0, 10)}, {lost, records("z6", 10, 10)}} {
		if err := zombie.Write(ctx, tx.txn, tx.recs); err != nil {
			t.Fatal(err)
		}
		if err := zombie.Prepare(ctx, tx.txn); err != nil {
			t.Fatal(err)
		}
	}
	// e2 rolls forward ckpt 5 (persisted as prepared) and redoes ckpt 6,
	// whose prepared record e1 never persisted.
	if err := successor.Commit(ctx, prepared); err != nil {
		t.Fatal(err)
	}
	if err := successor.Write(ctx, redo, records("s6", 10, 12)); err != nil {
		t.Fatal(err)
	}
	if err := successor.Prepare(ctx, redo); err != nil {
		t.Fatal(err)
	}
	if err := successor.Commit(ctx, redo); err != nil {
		t.Fatal(err)
	}
	js := srv.JetStream(t)
	want := slices.Concat(records("z5", 0, 10), records("s6", 10, 12))
	sameRecords(t, "after the takeover", readOutput(t, js, "out"), want)

	if err := zombie.Commit(ctx, prepared); err != nil {
		t.Fatalf("zombie's late commit of the rolled-forward txn: %v, want success", err)
	}
	if err := zombie.Commit(ctx, lost); !errors.Is(err, tmjs.ErrTxnConflict) {
		t.Fatalf("zombie's commit of a checkpoint id e2 committed: %v, want ErrTxnConflict", err)
	}
	sameRecords(t, "after the zombie's commits", readOutput(t, js, "out"), want)
}

// TestSinkAbortDiscards: an aborted txn leaves nothing in staging and
// cannot be committed; an unprepared txn cannot be either.
func TestSinkAbortDiscards(t *testing.T) {
	srv := natstest.Start(t)
	outputStreams(t, srv, "out")
	ctx := t.Context()
	s := newSink(t, srv, tmjs.SinkConfig{Stream: "out"})
	txn := job.Txn{ID: "ckpt-00000000000000000002", Writer: "e1"}
	if err := s.Write(ctx, txn, records("x", 0, 5)); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, txn); !errors.Is(err, tmjs.ErrNotPrepared) {
		t.Fatalf("commit before prepare: %v, want ErrNotPrepared", err)
	}
	if err := s.Prepare(ctx, txn); err != nil {
		t.Fatal(err)
	}
	if err := s.Abort(ctx, txn); err != nil {
		t.Fatal(err)
	}
	js := srv.JetStream(t)
	st, err := js.Stream(ctx, "out_staging")
	if err != nil {
		t.Fatal(err)
	}
	if n := st.CachedInfo().State.Msgs; n != 0 {
		t.Fatalf("staging holds %d messages after Abort, want 0", n)
	}
	if err := s.Commit(ctx, txn); !errors.Is(err, tmjs.ErrNotPrepared) {
		t.Fatalf("commit after abort: %v, want ErrNotPrepared", err)
	}
	if got := readOutput(t, js, "out"); len(got) != 0 {
		t.Fatalf("%d records visible, want none", len(got))
	}
}

// TestSinkEmptyTxn: a checkpoint without output commits (a marker only).
func TestSinkEmptyTxn(t *testing.T) {
	srv := natstest.Start(t)
	outputStreams(t, srv, "out")
	ctx := t.Context()
	s := newSink(t, srv, tmjs.SinkConfig{Stream: "out"})
	txn := job.Txn{ID: "ckpt-00000000000000000009", Writer: "e1"}
	if err := s.Prepare(ctx, txn); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := s.Commit(ctx, txn); err != nil {
			t.Fatal(err)
		}
	}
	if got := readOutput(t, srv.JetStream(t), "out"); len(got) != 0 {
		t.Fatalf("%d records visible, want none", len(got))
	}
}

// TestSinkRefusesUnsafeOutput: an output stream that could drop markers,
// or refuses atomic batches, is refused before anything is written.
func TestSinkRefusesUnsafeOutput(t *testing.T) {
	srv := natstest.Start(t)
	js := srv.JetStream(t)
	ctx := t.Context()
	for _, cfg := range []natsjs.StreamConfig{
		{Name: "noatomic", Subjects: []string{"noatomic.>"}},
		{Name: "limited", Subjects: []string{"limited.>"}, AllowAtomicPublish: true, MaxMsgs: 1000},
		{Name: "wq", Subjects: []string{"wq.>"}, AllowAtomicPublish: true, Retention: natsjs.WorkQueuePolicy},
	} {
		if _, err := js.CreateStream(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		if _, err := js.CreateStream(ctx, natsjs.StreamConfig{Name: cfg.Name + "_staging", Subjects: []string{cfg.Name + "_staging.>"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := tmjs.NewSink(ctx, js, tmjs.SinkConfig{Stream: cfg.Name}); !errors.Is(err, tmjs.ErrConfig) {
			t.Errorf("stream %s: NewSink: %v, want ErrConfig", cfg.Name, err)
		}
	}
}

// TestSinkStagingDuplicateIgnored: a staged record stored twice (a client
// that sent it again) is still committed once by a node reading staging.
func TestSinkStagingDuplicateIgnored(t *testing.T) {
	srv := natstest.Start(t)
	outputStreams(t, srv, "out")
	ctx := t.Context()
	js := srv.JetStream(t)
	txn := job.Txn{ID: "ckpt-00000000000000000011", Writer: "e4"}
	want := records("dup", 0, 5)
	w := newSink(t, srv, tmjs.SinkConfig{Stream: "out"})
	if err := w.Write(ctx, txn, want[:3]); err != nil {
		t.Fatal(err)
	}
	// Store the third staged message again, as a resend would.
	st, err := js.Stream(ctx, "out_staging")
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for st.CachedInfo().State.Msgs < 3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		if st, err = js.Stream(ctx, "out_staging"); err != nil {
			t.Fatal(err)
		}
	}
	third, err := st.GetMsg(ctx, st.CachedInfo().State.LastSeq)
	if err != nil {
		t.Fatal(err)
	}
	dup := nats.NewMsg(third.Subject)
	dup.Header, dup.Data = third.Header, third.Data
	dup.Header.Del(nats.MsgIdHdr) // else the server drops it: stored twice here
	if _, err := js.PublishMsg(ctx, dup); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(ctx, txn, want[3:]); err != nil {
		t.Fatal(err)
	}
	if err := w.Prepare(ctx, txn); err != nil {
		t.Fatal(err)
	}
	if err := newSink(t, srv, tmjs.SinkConfig{Stream: "out"}).Commit(ctx, txn); err != nil {
		t.Fatal(err)
	}
	sameRecords(t, "committed from staging with a duplicate", readOutput(t, js, "out"), want)
}

// TestSinkStagingCopyAfterLaterRecords: a staged record whose first copy
// was lost and which was published again after later ones (waitAcks
// does so when an ack is lost) is committed in its place by a node
// reading staging.
func TestSinkStagingCopyAfterLaterRecords(t *testing.T) {
	srv := natstest.Start(t)
	outputStreams(t, srv, "out")
	ctx := t.Context()
	js := srv.JetStream(t)
	txn := job.Txn{ID: "ckpt-00000000000000000012", Writer: "e5"}
	want := records("late", 0, 5)
	w := newSink(t, srv, tmjs.SinkConfig{Stream: "out"})
	if err := w.Write(ctx, txn, want); err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, "out_staging")
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for st.CachedInfo().State.Msgs < 5 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		if st, err = js.Stream(ctx, "out_staging"); err != nil {
			t.Fatal(err)
		}
	}
	// The second record is lost; its copy comes after the fifth.
	first := st.CachedInfo().State.FirstSeq
	second, err := st.GetMsg(ctx, first+1)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteMsg(ctx, first+1); err != nil {
		t.Fatal(err)
	}
	again := nats.NewMsg(second.Subject)
	again.Header, again.Data = second.Header, second.Data
	again.Header.Del(nats.MsgIdHdr) // the server remembers the id of the deleted one
	if _, err := js.PublishMsg(ctx, again); err != nil {
		t.Fatal(err)
	}
	if err := w.Prepare(ctx, txn); err != nil {
		t.Fatal(err)
	}
	if err := newSink(t, srv, tmjs.SinkConfig{Stream: "out"}).Commit(ctx, txn); err != nil {
		t.Fatal(err)
	}
	sameRecords(t, "committed from staging with a record out of order", readOutput(t, js, "out"), want)
}

// TestSinkChunksByBytes: a txn larger than MaxBatchBytes is cut into
// several batches by size; retried from another node it is published once.
func TestSinkChunksByBytes(t *testing.T) {
	srv := natstest.Start(t)
	outputStreams(t, srv, "out")
	ctx := t.Context()
	cfg := tmjs.SinkConfig{Stream: "out", MaxBatchBytes: 60}
	txn := job.Txn{ID: "ckpt-00000000000000000012", Writer: "e1"}
	want := records("bytes", 0, 30) // about 12 bytes each: 6 chunks or so
	s := newSink(t, srv, cfg)
	if err := s.Write(ctx, txn, want); err != nil {
		t.Fatal(err)
	}
	if err := s.Prepare(ctx, txn); err != nil {
		t.Fatal(err)
	}
	if err := tmjs.CommitPartly(ctx, s, txn, 3); err != nil {
		t.Fatal(err)
	}
	js := srv.JetStream(t)
	partial := readOutput(t, js, "out")
	if len(partial) == 0 || len(partial) >= len(want) {
		t.Fatalf("3 chunks published %d of %d records: the txn was not cut by bytes", len(partial), len(want))
	}
	if err := newSink(t, srv, cfg).Commit(ctx, txn); err != nil {
		t.Fatal(err)
	}
	sameRecords(t, "after the commit", readOutput(t, js, "out"), want)
}
