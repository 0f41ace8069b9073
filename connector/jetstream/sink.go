package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/tidemark-io/tidemark/job"
)

// Headers of the sink's messages.
const (
	// subjectHeader names, on a staged message, the output subject it
	// is published to at commit.
	subjectHeader = "Tidemark-Subject"
	// sealHeader marks a txn's last staged message, written by Prepare.
	sealHeader = "Tidemark-Prepared"
	// indexHeader numbers a txn's staged records from 0, so that a
	// commit reading staging back skips a duplicate and detects a gap.
	indexHeader = "Tidemark-Index"
)

// JetStream's atomic batch protocol (ADR-50), in headers: nats.go v1.55.0
// has no client API for it.
const (
	hdrBatchID     = "Nats-Batch-Id"
	hdrBatchSeq    = "Nats-Batch-Sequence"
	hdrBatchCommit = "Nats-Batch-Commit"
	hdrExpectSubj  = "Nats-Expected-Last-Subject-Sequence"
)

// JetStream API error codes the sink tells apart.
const (
	errCodeWrongLastSeq      = 10071 // the marker subject already has a message
	errCodeWrongLastSeqConst = 10164 // the marker subject is in another batch in flight
)

// DefaultMaxBatch is nats-server's default limit on the messages of one
// atomic batch (jetstream.limits.batch.max_msgs).
const DefaultMaxBatch = 1000

// SinkConfig configures a Sink.
type SinkConfig struct {
	// Stream is the output stream. Records go to "<Stream>.<p>"; the
	// commit markers to "<Stream>.txn.<checkpoint id>.<chunk>" (see
	// Part), which a consumer filtering "<Stream>.*" never sees.
	// CreateOutputStreams makes a stream that fits.
	Stream string
	// Partitions is how many data subjects records are spread over, by
	// PartitionOf(key) (default 1).
	Partitions int
	// MaxBatch is the messages of one atomic batch, marker included: at
	// most the server's limit (default DefaultMaxBatch).
	MaxBatch int
	// MaxBatchBytes bounds the record bytes of one atomic batch (default
	// 8 MiB), which the server proposes and stores as one unit.
	MaxBatchBytes int
	// Part, if not empty, names the part of a job spanning hosts this
	// sink writes for (job.WorkerConfig.Sink: the worker's slot). Every
	// part commits its own transaction of each checkpoint id, so its
	// markers go to "<Stream>.txn.<Part>.<checkpoint id>.<chunk>" and its
	// staging to a subject of its own. The coordinator commits a slot's
	// transactions with a sink of the same Part.
	Part string
}

// Sink is an exactly-once JetStream sink (job.Sink) under the
// roll-forward contract.
//
// Write stages records in the staging stream "<Stream>_staging", on the
// subject of the txn; Prepare waits until every staged message is stored
// and seals the txn with its layout (how many records, chunked how). The
// output stream holds nothing of the txn yet. Commit, from any node,
// reads the sealed staging and publishes it to the output stream as
// atomic batches: the first message of each batch is a marker on
// "<Stream>.txn.<id>.<chunk>" that names the txn and carries
// Nats-Expected-Last-Subject-Sequence: 0, so the server stores the batch
// only if that marker subject is empty. A second commit of the same chunk
// (a retry, a lost reply, recovery elsewhere, a zombie, a concurrent
// call) is rejected whole by the server; the sink then reads the marker,
// and a marker naming this txn means the chunk is in: success, nothing
// published twice. A marker naming another writer is ErrTxnConflict. The
// marker is permanent, so this holds forever, not for a dedupe window.
//
// The writer keeps a txn's records in memory from Write until its Commit
// (which then need not read staging back): memory grows with the output
// of the checkpoints in flight, one or two.
type Sink struct {
	js    natsjs.JetStream
	nc    *nats.Conn
	cfg   SinkConfig
	stage string // staging stream name and subject prefix
	// out and staged are handles on the two streams: by name, so that
	// they stay valid across reconnects and server restarts.
	out, staged natsjs.Stream

	mu   sync.Mutex
	open map[job.Txn]*stagedTxn
	// prepared keeps what this process sealed, so that its own Commit
	// (the common case) need not read staging back. It holds the output
	// of the checkpoints between Prepare and Commit: one or two.
	prepared map[job.Txn]*preparedTxn
}

// preparedTxn is a sealed txn as this process wrote it.
type preparedTxn struct {
	seal seal
	msgs []stagedMsg
}

// stagedTxn is what this process wrote to a txn and has not sealed yet.
type stagedTxn struct {
	msgs    []stagedMsg
	futures []natsjs.PubAckFuture
}

// seal is the layout of a prepared txn, fixed at Prepare so that every
// node that commits it cuts the same chunks.
type seal struct {
	Txn        string `json:"txn"`
	Records    int    `json:"records"`
	ChunkMsgs  int    `json:"chunk_msgs"`  // records per chunk at most
	ChunkBytes int    `json:"chunk_bytes"` // record bytes per chunk at most
}

// marker is the first message of each committed chunk.
type marker struct {
	Txn    string `json:"txn"` // job.Txn.String()
	Chunk  int    `json:"chunk"`
	Chunks int    `json:"chunks"`
	// Records is how many records this chunk published.
	Records int `json:"records"`
}

var _ job.Sink = (*Sink)(nil)

// NewSink returns a sink writing to cfg.Stream through js. The output
// and staging streams must exist (CreateOutputStreams); NewSink checks
// that the output stream allows atomic batches and keeps its markers.
func NewSink(ctx context.Context, js natsjs.JetStream, cfg SinkConfig) (*Sink, error) {
	if err := validName(cfg.Stream); err != nil {
		return nil, err
	}
	if cfg.Partitions <= 0 {
		cfg.Partitions = 1
	}
	if cfg.MaxBatch == 0 {
		cfg.MaxBatch = DefaultMaxBatch
	}
	if cfg.MaxBatch < 2 {
		return nil, fmt.Errorf("%w: MaxBatch %d: a batch needs room for the marker and a record", ErrConfig, cfg.MaxBatch)
	}
	if cfg.MaxBatchBytes <= 0 {
		cfg.MaxBatchBytes = 8 << 20
	}
	st, err := js.Stream(ctx, cfg.Stream)
	if err != nil {
		return nil, fmt.Errorf("jetstream: output stream %s: %w", cfg.Stream, err)
	}
	if err := checkOutput(st.CachedInfo().Config); err != nil {
		return nil, err
	}
	stage := stagingName(cfg.Stream)
	staged, err := js.Stream(ctx, stage)
	if err != nil {
		return nil, fmt.Errorf("jetstream: staging stream %s: %w", stage, err)
	}
	return &Sink{
		js: js, nc: js.Conn(), cfg: cfg, stage: stage, out: st, staged: staged,
		open: map[job.Txn]*stagedTxn{}, prepared: map[job.Txn]*preparedTxn{},
	}, nil
}

// checkOutput refuses an output stream that could drop a marker: a commit
// retried after that would publish its chunk again.
func checkOutput(c natsjs.StreamConfig) error {
	switch {
	case !c.AllowAtomicPublish:
		return fmt.Errorf("%w: output stream %s does not allow atomic publish (allow_atomic)", ErrConfig, c.Name)
	case c.Retention != natsjs.LimitsPolicy:
		return fmt.Errorf("%w: output stream %s has retention %v: markers would be removed", ErrConfig, c.Name, c.Retention)
	case c.MaxAge > 0 || c.MaxMsgs > 0 || c.MaxBytes > 0:
		return fmt.Errorf("%w: output stream %s has age, message or byte limits: markers would be removed", ErrConfig, c.Name)
	}
	return nil
}

func stagingName(stream string) string { return stream + "_staging" }

// CreateOutputStreams creates (or updates) the output stream of a sink,
// subjects "<name>.>" with atomic publish allowed and no limits, and its
// staging stream "<name>_staging", both file-stored with the given
// replicas (0 means 1).
func CreateOutputStreams(ctx context.Context, js natsjs.JetStream, name string, replicas int) error {
	if err := validName(name); err != nil {
		return err
	}
	r := max(replicas, 1)
	if _, err := js.CreateOrUpdateStream(ctx, natsjs.StreamConfig{
		Name:               name,
		Subjects:           []string{name + ".>"},
		Storage:            natsjs.FileStorage,
		Replicas:           r,
		AllowAtomicPublish: true,
	}); err != nil {
		return fmt.Errorf("jetstream: create output stream %s: %w", name, err)
	}
	stage := stagingName(name)
	if _, err := js.CreateOrUpdateStream(ctx, natsjs.StreamConfig{
		Name:     stage,
		Subjects: []string{stage + ".>"},
		Storage:  natsjs.FileStorage,
		Replicas: r,
	}); err != nil {
		return fmt.Errorf("jetstream: create staging stream %s: %w", stage, err)
	}
	return nil
}

func (s *Sink) stagingSubject(txn job.Txn) string {
	return s.stage + "." + s.part() + token(txn.ID) + "." + token(txn.Writer)
}

// part is the subject tokens of SinkConfig.Part, with their dot.
func (s *Sink) part() string {
	if s.cfg.Part == "" {
		return ""
	}
	return token(s.cfg.Part) + "."
}

// MarkerSubject returns the subject of chunk's commit marker of checkpoint
// id in the output stream.
func (s *Sink) MarkerSubject(id string, chunk int) string {
	return s.cfg.Stream + ".txn." + s.part() + token(id) + "." + strconv.Itoa(chunk)
}

// Write stages recs in txn. Nothing reaches the output stream.
func (s *Sink) Write(ctx context.Context, txn job.Txn, recs []job.Record) error {
	s.mu.Lock()
	st := s.open[txn]
	if st == nil {
		st = &stagedTxn{}
		s.open[txn] = st
	}
	s.mu.Unlock()
	subj := s.stagingSubject(txn)
	for _, r := range recs {
		m := NewMsg(subj, r)
		out := PartitionSubject(s.cfg.Stream, PartitionOf(r.Key, s.cfg.Partitions))
		m.Header.Set(subjectHeader, out)
		m.Header.Set(indexHeader, strconv.Itoa(len(st.msgs)))
		// The server drops a copy that waitAcks publishes again.
		m.Header.Set(nats.MsgIdHdr, subj+"#"+strconv.Itoa(len(st.msgs)))
		f, err := s.js.PublishMsgAsync(m)
		if err != nil {
			return fmt.Errorf("jetstream: stage a record of %s: %w", txn, err)
		}
		st.futures = append(st.futures, f)
		st.msgs = append(st.msgs, stagedMsg{subject: out, key: m.Header.Get(KeyHeader), data: r.Value})
		// Bound the acks in flight, and surface an error early.
		if len(st.futures) >= 1024 {
			if err := s.waitAcks(ctx, st); err != nil {
				return fmt.Errorf("jetstream: stage records of %s: %w", txn, err)
			}
		}
	}
	return nil
}

// ackWait is how long waitAcks waits for the staged messages'
// acknowledgements before it publishes the missing ones again. A message
// sent to a stream leader that died is never acknowledged, and the
// client, connected to a live node, sees no disconnect: waiting for the
// ack alone stalled a worker for 30 s after a node kill.
const ackWait = 3 * time.Second

// waitAcks waits until every message staged in st is stored. Messages
// whose ack is lost (a reconnect, a leader's death) or still missing
// after ackWait are published again, one by one, synchronously and with
// retries; a Nats-Msg-Id makes the server drop the copy of one stored
// after all. A copy may land after later messages: readStaging orders
// them by index.
func (s *Sink) waitAcks(ctx context.Context, st *stagedTxn) error {
	timer := time.NewTimer(ackWait)
	defer timer.Stop()
	expired := false // every message was sent ackWait ago or more
	for _, f := range st.futures {
		var err error
		if !expired {
			select {
			case <-f.Ok():
				continue
			case err = <-f.Err():
			case <-timer.C:
				expired = true
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if expired {
			select {
			case <-f.Ok():
				continue
			case err = <-f.Err():
			default:
			}
		}
		if err != nil && !transient(err) {
			return err
		}
		old := f.Msg()
		m := &nats.Msg{Subject: old.Subject, Header: nats.Header{}, Data: old.Data}
		for k, v := range old.Header {
			m.Header[k] = v
		}
		if err := retry(ctx, func(rctx context.Context) error {
			_, err := s.js.PublishMsg(rctx, m)
			return err
		}); err != nil {
			return fmt.Errorf("publish a staged message again: %w", err)
		}
	}
	st.futures = st.futures[:0]
	return nil
}

// Prepare waits until every record staged in txn is stored, then seals
// the txn with its layout. After it returns nil any node can Commit txn.
func (s *Sink) Prepare(ctx context.Context, txn job.Txn) error {
	s.mu.Lock()
	st := s.open[txn]
	s.mu.Unlock()
	if st == nil {
		st = &stagedTxn{} // a checkpoint with no output
	}
	if err := s.waitAcks(ctx, st); err != nil {
		return fmt.Errorf("jetstream: prepare %s: staged records: %w", txn, err)
	}
	sl := seal{Txn: txn.String(), Records: len(st.msgs), ChunkMsgs: s.cfg.MaxBatch - 1, ChunkBytes: s.cfg.MaxBatchBytes}
	body, err := json.Marshal(sl)
	if err != nil {
		return err
	}
	m := nats.NewMsg(s.stagingSubject(txn))
	m.Header.Set(sealHeader, "1")
	m.Data = body
	// A seal stored twice (a retry after a lost ack) is harmless: the
	// last message is a seal either way.
	if err := retry(ctx, func(rctx context.Context) error {
		_, err := s.js.PublishMsg(rctx, m)
		return err
	}); err != nil {
		return fmt.Errorf("jetstream: prepare %s: seal: %w", txn, err)
	}
	s.mu.Lock()
	delete(s.open, txn)
	s.prepared[txn] = &preparedTxn{seal: sl, msgs: st.msgs}
	s.mu.Unlock()
	return nil
}

// stagedMsg is a record read back from staging, ready to publish.
type stagedMsg struct {
	subject string
	key     string // KeyHeader value, "" for none
	data    []byte
}

// Commit publishes txn's staged records to the output stream, each chunk
// as one atomic batch guarded by its marker. It is idempotent forever and
// safe to call concurrently, from any node: see Sink.
func (s *Sink) Commit(ctx context.Context, txn job.Txn) error {
	return s.commit(ctx, txn, -1)
}

// commit commits txn's first limit chunks (all when limit < 0; tests stop
// early to stand for a crash in the middle of a commit).
func (s *Sink) commit(ctx context.Context, txn job.Txn, limit int) error {
	done, err := s.committed(ctx, txn)
	s.mu.Lock()
	mine := s.prepared[txn]
	if done || errors.Is(err, ErrTxnConflict) {
		delete(s.prepared, txn)
	}
	s.mu.Unlock()
	if errors.Is(err, ErrTxnConflict) {
		// This txn can never commit: its staging is garbage.
		_ = s.purge(ctx, txn)
	}
	if err != nil || done {
		return err
	}
	var (
		sl   *seal
		msgs []stagedMsg
	)
	if mine != nil {
		sl, msgs = &mine.seal, mine.msgs
	} else {
		sl, msgs, err = s.readStaging(ctx, txn)
	}
	if errors.Is(err, ErrNotPrepared) {
		// A concurrent commit may have finished and purged staging.
		if done, cerr := s.committed(ctx, txn); cerr != nil || done {
			return cerr
		}
	}
	if err != nil {
		return err
	}
	chunks := chunk(msgs, sl.ChunkMsgs, sl.ChunkBytes)
	for k, c := range chunks {
		if k == limit {
			return nil
		}
		mk := marker{Txn: txn.String(), Chunk: k, Chunks: len(chunks), Records: len(c)}
		if err := s.commitChunk(ctx, txn, mk, c); err != nil {
			return err
		}
	}
	// Staging is no longer needed: the markers answer every later call.
	// A failed purge leaves garbage, not a wrong result.
	s.mu.Lock()
	delete(s.prepared, txn)
	s.mu.Unlock()
	_ = s.purge(ctx, txn)
	return nil
}

// committed reports whether every chunk of txn is in the output stream,
// and ErrTxnConflict when another txn holds the checkpoint id.
func (s *Sink) committed(ctx context.Context, txn job.Txn) (bool, error) {
	m, err := s.marker(ctx, txn.ID, 0)
	if err != nil || m == nil {
		return false, err
	}
	if m.Txn != txn.String() {
		return false, fmt.Errorf("%w: %s holds %s, not %s", ErrTxnConflict, s.MarkerSubject(txn.ID, 0), m.Txn, txn)
	}
	if m.Chunks <= 1 {
		return true, nil
	}
	last, err := s.marker(ctx, txn.ID, m.Chunks-1)
	if err != nil || last == nil {
		return false, err
	}
	return last.Txn == txn.String(), nil
}

// marker reads chunk's marker of checkpoint id, or nil when there is none.
func (s *Sink) marker(ctx context.Context, id string, chunk int) (*marker, error) {
	var raw *natsjs.RawStreamMsg
	err := retry(ctx, func(rctx context.Context) error {
		var err error
		raw, err = s.out.GetLastMsgForSubject(rctx, s.MarkerSubject(id, chunk))
		return err
	})
	if errors.Is(err, natsjs.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("jetstream: read marker %s: %w", s.MarkerSubject(id, chunk), err)
	}
	var m marker
	if err := json.Unmarshal(raw.Data, &m); err != nil {
		return nil, fmt.Errorf("jetstream: marker %s: %w", s.MarkerSubject(id, chunk), err)
	}
	return &m, nil
}

// readStaging reads txn's sealed staging in order.
func (s *Sink) readStaging(ctx context.Context, txn job.Txn) (*seal, []stagedMsg, error) {
	st := s.staged
	subj := s.stagingSubject(txn)
	// The last message of the subject is the seal, if Prepare finished.
	var last *natsjs.RawStreamMsg
	err := retry(ctx, func(rctx context.Context) error {
		var err error
		last, err = st.GetLastMsgForSubject(rctx, subj)
		return err
	})
	if errors.Is(err, natsjs.ErrMsgNotFound) || (err == nil && last.Header.Get(sealHeader) == "") {
		return nil, nil, fmt.Errorf("%w: %s has no sealed staging", ErrNotPrepared, txn)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("jetstream: staging of %s: %w", txn, err)
	}
	var sl seal
	if err := json.Unmarshal(last.Data, &sl); err != nil || sl.Txn != txn.String() || sl.ChunkMsgs < 1 {
		return nil, nil, fmt.Errorf("jetstream: staging of %s: bad seal %q", txn, last.Data)
	}
	// Messages are stored in index order but for one published again by
	// waitAcks, which may land after later ones; a copy is skipped.
	msgs := make([]stagedMsg, sl.Records)
	have := make([]bool, sl.Records)
	if sl.Records > 0 {
		var cons natsjs.Consumer
		err := retry(ctx, func(rctx context.Context) error {
			var err error
			cons, err = st.OrderedConsumer(rctx, natsjs.OrderedConsumerConfig{FilterSubjects: []string{subj}})
			return err
		})
		if err != nil {
			return nil, nil, fmt.Errorf("jetstream: read staging of %s: %w", txn, err)
		}
		it, err := cons.Messages(natsjs.PullMaxMessages(min(sl.Records+1, 1000)),
			// A lost pull is noticed after two missed heartbeats, not 30 s.
			natsjs.PullHeartbeat(2*time.Second))
		if err != nil {
			return nil, nil, fmt.Errorf("jetstream: read staging of %s: %w", txn, err)
		}
		defer it.Stop()
		for got := 0; got < sl.Records; {
			m, err := it.Next(natsjs.NextContext(ctx))
			if err != nil {
				return nil, nil, fmt.Errorf("%w: %s: staging read after %d of %d records: %v", ErrNotPrepared, txn, got, sl.Records, err)
			}
			h := m.Headers()
			if h.Get(sealHeader) != "" {
				return nil, nil, fmt.Errorf("%w: %s: seal after %d of %d records", ErrNotPrepared, txn, got, sl.Records)
			}
			i, err := strconv.Atoi(h.Get(indexHeader))
			if err != nil || i < 0 || i >= sl.Records {
				return nil, nil, fmt.Errorf("jetstream: staging of %s: record %q of %d", txn, h.Get(indexHeader), sl.Records)
			}
			if have[i] {
				continue // a duplicate of a record already read
			}
			have[i], got = true, got+1
			msgs[i] = stagedMsg{subject: h.Get(subjectHeader), key: h.Get(KeyHeader), data: m.Data()}
		}
	}
	return &sl, msgs, nil
}

// chunk cuts msgs into runs of at most n messages and about b bytes; an
// empty txn is one empty chunk, so its marker still records the commit.
func chunk(msgs []stagedMsg, n, b int) [][]stagedMsg {
	var out [][]stagedMsg
	start, size := 0, 0
	for i, m := range msgs {
		sz := len(m.data) + len(m.key)
		if i > start && (i-start >= n || size+sz > b) {
			out = append(out, msgs[start:i])
			start, size = i, 0
		}
		size += sz
	}
	return append(out, msgs[start:])
}

// commitChunk publishes one chunk as an atomic batch and settles what a
// rejection means by reading the marker.
func (s *Sink) commitChunk(ctx context.Context, txn job.Txn, mk marker, recs []stagedMsg) error {
	subj := s.MarkerSubject(txn.ID, mk.Chunk)
	backoff := 20 * time.Millisecond
	for attempt := 1; ; attempt++ {
		perr := s.publishBatch(ctx, mk, subj, recs)
		if perr == nil {
			return nil
		}
		got, err := s.marker(ctx, txn.ID, mk.Chunk)
		if err != nil {
			return err
		}
		switch {
		case got != nil && got.Txn == txn.String():
			return nil // ours: committed earlier or by a concurrent call
		case got != nil:
			return fmt.Errorf("%w: %s holds %s, not %s", ErrTxnConflict, subj, got.Txn, txn)
		}
		// No marker: the batch failed, or a concurrent one is in flight
		// and not stored yet (error 10164). Try again a few times.
		var apiErr *natsjs.APIError
		transient := errors.As(perr, &apiErr) && apiErr.ErrorCode == errCodeWrongLastSeqConst
		if attempt >= 5 && !transient || attempt >= 50 {
			return fmt.Errorf("jetstream: commit %s chunk %d: %w", txn, mk.Chunk, perr)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// publishBatch sends the marker and recs as one atomic batch and returns
// the server's verdict on the commit message.
func (s *Sink) publishBatch(ctx context.Context, mk marker, subj string, recs []stagedMsg) error {
	body, err := json.Marshal(mk)
	if err != nil {
		return err
	}
	id := nuid.Next()
	seq := 0
	n := len(recs) + 1
	msg := func(subject string, data []byte) *nats.Msg {
		seq++
		m := nats.NewMsg(subject)
		m.Data = data
		m.Header.Set(hdrBatchID, id)
		m.Header.Set(hdrBatchSeq, strconv.Itoa(seq))
		if seq == n {
			m.Header.Set(hdrBatchCommit, "1")
		}
		return m
	}
	first := msg(subj, body)
	first.Header.Set(hdrExpectSubj, "0")
	send := func(m *nats.Msg) error {
		if m.Header.Get(hdrBatchCommit) == "" {
			// The server answers an uncommitted message only when asked;
			// a failure shows in the commit's reply.
			return s.nc.PublishMsg(m)
		}
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		reply, err := s.nc.RequestMsgWithContext(rctx, m)
		if err != nil {
			return err
		}
		var ack struct {
			Error *natsjs.APIError `json:"error"`
			Seq   uint64           `json:"seq"`
			Count int              `json:"count"`
		}
		if err := json.Unmarshal(reply.Data, &ack); err != nil {
			return fmt.Errorf("batch reply %q: %w", reply.Data, err)
		}
		if ack.Error != nil {
			return ack.Error
		}
		if ack.Count != n {
			return fmt.Errorf("batch stored %d messages, sent %d", ack.Count, n)
		}
		return nil
	}
	if err := send(first); err != nil {
		return err
	}
	for _, r := range recs {
		m := msg(r.subject, r.data)
		if r.key != "" {
			m.Header.Set(KeyHeader, r.key)
		}
		if err := send(m); err != nil {
			return err
		}
	}
	return nil
}

// Abort discards txn's staging. Best effort: leftovers of a txn nobody
// prepared harm no output.
func (s *Sink) Abort(ctx context.Context, txn job.Txn) error {
	s.mu.Lock()
	delete(s.open, txn)
	delete(s.prepared, txn)
	s.mu.Unlock()
	return s.purge(ctx, txn)
}

func (s *Sink) purge(ctx context.Context, txn job.Txn) error {
	if err := retry(ctx, func(rctx context.Context) error {
		return s.staged.Purge(rctx, natsjs.WithPurgeSubject(s.stagingSubject(txn)))
	}); err != nil {
		return fmt.Errorf("jetstream: purge staging of %s: %w", txn, err)
	}
	return nil
}
