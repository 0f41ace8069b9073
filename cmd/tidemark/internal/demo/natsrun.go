package demo

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/cmd/tidemark/internal/demofault"
	"github.com/tidemark-io/tidemark/connector/jetstream"
	"github.com/tidemark-io/tidemark/job"
	"github.com/tidemark-io/tidemark/state"
)

// StreamPartitions is the number of partitions of the input stream that
// Produce fills and RunNATS reads, and of its output stream.
const StreamPartitions = 4

// OutputStream returns the name of the output stream of input stream in.
func OutputStream(in string) string { return in + "_out" }

// ErrStreamNotFound is returned when the input stream does not exist.
var ErrStreamNotFound = errors.New("demo: input stream not found")

// Produce fills stream with the demo's records words deterministically:
// record i is Source.At(i), published with Nats-Msg-Id i. It creates the
// stream if absent. A stream that holds exactly records messages is left
// as it is (0 published); one holding any other number is refused.
func Produce(ctx context.Context, js natsjs.JetStream, stream string, records uint64, words int) (uint64, error) {
	st, err := jetstream.CreateInputStream(ctx, js, stream, 1)
	if err != nil {
		return 0, fmt.Errorf("demo: produce: create stream %s: %w", stream, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("demo: produce: stream %s: %w", stream, err)
	}
	switch have := info.State.Msgs; {
	case have == records:
		return 0, nil
	case have != 0:
		return 0, fmt.Errorf("demo: produce: stream %s already holds %d records, not %d: delete it or use another stream", stream, have, records)
	}
	src := NewSource(records, words)
	const window = 512
	acks := make([]natsjs.PubAckFuture, 0, window)
	wait := func() error {
		for _, a := range acks {
			select {
			case <-a.Ok():
			case err := <-a.Err():
				return fmt.Errorf("demo: produce: publish to %s: %w", stream, err)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		acks = acks[:0]
		return nil
	}
	for i := range records {
		word := src.At(i)
		m := jetstream.NewMsg(jetstream.PartitionSubject(stream, jetstream.PartitionOf([]byte(word), StreamPartitions)), job.Record{Key: []byte(word)})
		m.Header.Set(nats.MsgIdHdr, strconv.FormatUint(i, 10))
		a, err := js.PublishMsgAsync(m)
		if err != nil {
			return i, fmt.Errorf("demo: produce: publish to %s: %w", stream, err)
		}
		if acks = append(acks, a); len(acks) == window {
			if err := wait(); err != nil {
				return i, err
			}
		}
	}
	return records, wait()
}

// NATS is where RunNATS reads and writes: the input stream Stream and
// the output stream OutputStream(Stream), through JS.
type NATS struct {
	JS     natsjs.JetStream
	Stream string
}

// CheckInput returns an error wrapping ErrStreamNotFound unless n.Stream
// exists. It changes nothing.
func (n NATS) CheckInput(ctx context.Context) error {
	if _, err := n.JS.Stream(ctx, n.Stream); err != nil {
		if errors.Is(err, natsjs.ErrStreamNotFound) {
			return fmt.Errorf("%w: %s (fill it first: tidemark demo produce)", ErrStreamNotFound, n.Stream)
		}
		return fmt.Errorf("demo: input stream %s: %w", n.Stream, err)
	}
	return nil
}

// RunNATS runs the word count in one process over the JetStream stream
// n.Stream to its end, writing each batch's per-word gains exactly once
// to the output stream. At the end it checks the output stream's sums
// and the final state against the counts of the input stream.
// cfg.Sink's store only holds the crash marker of --crash-after-records.
func RunNATS(ctx context.Context, cfg Config, n NATS) (Result, error) {
	cfg = cfg.withDefaults()
	if cfg.Storage == nil || cfg.Sink == nil || cfg.Dir == "" || n.JS == nil {
		return Result{}, errors.New("demo: run: Storage, Sink, Dir and JetStream are required")
	}
	if err := n.CheckInput(ctx); err != nil {
		return Result{}, err
	}
	out := OutputStream(n.Stream)
	if err := refuseOthersOutput(ctx, cfg.Storage, n.JS, out); err != nil {
		return Result{}, err
	}
	if err := jetstream.CreateOutputStreams(ctx, n.JS, out, 1); err != nil {
		return Result{}, fmt.Errorf("demo: output stream %s: %w", out, err)
	}
	sink, err := jetstream.NewSink(ctx, n.JS, jetstream.SinkConfig{Stream: out, Partitions: StreamPartitions})
	if err != nil {
		return Result{}, fmt.Errorf("demo: %w", err)
	}
	src, err := jetstream.NewSource(n.JS, jetstream.SourceConfig{
		Stream: n.Stream, Partitions: []int{0, 1, 2, 3}, MaxRecords: cfg.Batch, StopAtEnd: true})
	if err != nil {
		return Result{}, fmt.Errorf("demo: %w", err)
	}
	defer src.Close()
	p := &streamCount{cfg: cfg, faults: demofault.From(ctx)}
	var res Result
	lastTick := time.Now()
	progress := func(ev string, from string) {
		if cfg.Progress != nil {
			cfg.Progress(Progress{Event: ev, From: from, Offset: p.total, Checkpoints: res.Checkpoints, LastCompleted: res.LastID})
		}
	}
	jc := job.Config{
		Storage: cfg.Storage, Dir: cfg.Dir, Source: src, Processor: p, Sink: sink,
		Interval: cfg.Interval, EveryRecords: cfg.EveryRecords, GCEvery: cfg.GCEvery,
		State: cfg.State, Owners: []string{OwnerCounts, OwnerTotals}, Logger: cfg.Logger,
		Observe: func(e job.Event) {
			switch e.Kind {
			case "start":
				res.RestoredID = e.Checkpoint
				progress("start", e.Checkpoint)
			case "checkpoint":
				res.Checkpoints++
				res.LastID = e.Checkpoint
				progress("checkpoint", "")
			case "batch":
				if time.Since(lastTick) >= time.Second {
					lastTick = time.Now()
					progress("records", "")
				}
			}
		},
	}
	j, err := job.Start(ctx, jc)
	if err != nil {
		return res, fmt.Errorf("demo: %w", err)
	}
	jres, err := waitOrStop(ctx, j, cfg)
	res.Action, res.Savepoint = jres.Action, jres.Savepoint
	res.EndOffset = p.total
	if p.err != nil && errors.Is(err, p.err) {
		err = p.err
	}
	if err != nil {
		if errors.Is(err, checkpoint.ErrFenced) {
			err = fmt.Errorf("demo: fenced: another node took over this job; this one stops without touching it: %w", err)
		}
		return res, err
	}
	select {
	case <-cfg.Stop:
		res.Stopped = true // stopped before the end of the stream
		return res, nil
	default:
	}
	res.Check, err = checkStreams(ctx, cfg, n)
	progress("done", "")
	if err != nil {
		return res, err
	}
	if !res.Check.OK() {
		return res, fmt.Errorf("%w: %s", ErrNotExactlyOnce, res.Check)
	}
	return res, nil
}

// ErrOutputTaken is returned when a job with no checkpoint finds its
// output stream holding output already: another job's, whose checkpoint
// ids it would reuse.
var ErrOutputTaken = errors.New("demo: the output stream holds another job's output")

// refuseOthersOutput refuses a store without any checkpoint whose output
// stream out already holds messages. It reads only.
func refuseOthersOutput(ctx context.Context, st checkpoint.Storage, js natsjs.JetStream, out string) error {
	cp, err := st.Load(ctx)
	if err != nil || cp != nil {
		return err
	}
	s, err := js.Stream(ctx, out)
	if errors.Is(err, natsjs.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("demo: output stream %s: %w", out, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return fmt.Errorf("demo: output stream %s: %w", out, err)
	}
	if info.State.Msgs > 0 {
		return fmt.Errorf("%w: %s holds %d messages but this store has no checkpoint: resume with the store that wrote them, or delete %s and %s_staging",
			ErrOutputTaken, out, info.State.Msgs, out, out)
	}
	return nil
}

// streamCount is RunNATS's Processor: the counts of each batch's words,
// and per word of the batch the count it gained (8 bytes, big-endian).
type streamCount struct {
	cfg    Config
	faults demofault.Faults
	total  uint64 // records in the state after the last batch
	err    error
}

func (p *streamCount) Process(ctx context.Context, st *state.Store, in []job.Record) ([]job.Record, error) {
	out, err := p.process(ctx, st, in)
	p.err = err
	return out, err
}

func (p *streamCount) process(ctx context.Context, st *state.Store, in []job.Record) ([]job.Record, error) {
	cnt, err := openCounts(st)
	if err != nil {
		return nil, err
	}
	delta := make(map[string]uint64)
	for _, r := range in {
		delta[string(r.Key)]++
	}
	if err := cnt.add(delta, uint64(len(in))); err != nil {
		return nil, err
	}
	if p.total, err = cnt.total(); err != nil {
		return nil, err
	}
	out := make([]job.Record, 0, len(delta))
	for _, word := range slices.Sorted(maps.Keys(delta)) {
		out = append(out, job.Record{Key: []byte(word), Value: be(delta[word])})
	}
	if slow := p.faults.Slow; slow > 0 {
		select {
		case <-time.After(slow):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return out, p.crash(ctx, uint64(len(in)))
}

// crash is demofault.Faults.CrashAfter, once per store, as in Run.
func (p *streamCount) crash(ctx context.Context, n uint64) error {
	at := p.faults.CrashAfter
	if at == 0 || p.total < at || p.total-n >= at {
		return nil
	}
	bs := p.cfg.Sink.bs
	marker := fmt.Sprintf("%s%d", CrashMarkerPrefix, at)
	if done, err := bs.Exists(ctx, marker); err != nil || done {
		return err
	}
	if err := bs.Put(ctx, marker, strings.NewReader(time.Now().UTC().Format(time.RFC3339))); err != nil {
		return fmt.Errorf("demo: write crash marker: %w", err)
	}
	if p.faults.Crash != nil {
		p.faults.Crash()
	}
	return fmt.Errorf("demo: at record %d: %w", p.total, ErrCrashed)
}

// checkStreams compares the output stream's sums per word, and the
// state of the latest completed checkpoint, with the input's counts.
func checkStreams(ctx context.Context, cfg Config, n NATS) (Check, error) {
	want := map[string]uint64{}
	var records uint64
	if err := readStream(ctx, n.JS, n.Stream, n.Stream+".*", func(m natsjs.Msg) error {
		k, err := keyOf(m)
		want[k]++
		records++
		return err
	}); err != nil {
		return Check{}, err
	}
	out := OutputStream(n.Stream)
	got := map[string]uint64{}
	if err := readStream(ctx, n.JS, out, out+".*", func(m natsjs.Msg) error {
		if len(m.Data()) != 8 {
			return fmt.Errorf("%w: %s: value of %d bytes", ErrCorruptOutput, m.Subject(), len(m.Data()))
		}
		k, err := keyOf(m)
		got[k] += binary.BigEndian.Uint64(m.Data())
		return err
	}); err != nil {
		return Check{}, err
	}
	// A marker per chunk, "<out>.txn.<id>.<chunk>": count the ids.
	txns := map[string]bool{}
	if err := readStream(ctx, n.JS, out, out+".txn.>", func(m natsjs.Msg) error {
		id, _, _ := strings.Cut(strings.TrimPrefix(m.Subject(), out+".txn."), ".")
		txns[id] = true
		return nil
	}); err != nil {
		return Check{}, err
	}
	cp, err := cfg.Storage.LoadLatestCompleted(ctx)
	if err != nil || cp == nil {
		return Check{}, fmt.Errorf("demo: check: no completed checkpoint to check (%v)", err)
	}
	state, total, _, err := (&wordCount{cfg: cfg}).finalState(ctx, cp)
	if err != nil {
		return Check{}, err
	}
	c := Check{Records: records, Words: len(want), Transactions: len(txns)}
	for _, w := range slices.Sorted(maps.Keys(union(want, got, state))) {
		c.OutputTotal += got[w]
		if got[w] != want[w] {
			c.OutputWrong++
			if len(c.OutputDiff) < 10 {
				c.OutputDiff = append(c.OutputDiff, fmt.Sprintf("%s: got %d, want %d", w, got[w], want[w]))
			}
		}
		if state[w] != want[w] {
			c.StateWrong++
			if len(c.StateDiff) < 10 {
				c.StateDiff = append(c.StateDiff, fmt.Sprintf("%s: got %d, want %d", w, state[w], want[w]))
			}
		}
	}
	if total != records {
		c.StateWrong++
		c.StateDiff = append(c.StateDiff, fmt.Sprintf("records in the state: got %d, want %d", total, records))
	}
	return c, nil
}

// keyOf decodes the key a message carries in jetstream.KeyHeader.
func keyOf(m natsjs.Msg) (string, error) {
	k, err := base64.StdEncoding.DecodeString(m.Headers().Get(jetstream.KeyHeader))
	if err != nil {
		return "", fmt.Errorf("%w: %s: key: %v", ErrCorruptOutput, m.Subject(), err)
	}
	return string(k), nil
}

func union(ms ...map[string]uint64) map[string]struct{} {
	u := map[string]struct{}{}
	for _, m := range ms {
		for k := range m {
			u[k] = struct{}{}
		}
	}
	return u
}

// readStream calls fn on every message of stream on subject filter, as
// the stream holds them now, through an ordered consumer.
func readStream(ctx context.Context, js natsjs.JetStream, stream, filter string, fn func(natsjs.Msg) error) error {
	c, err := js.OrderedConsumer(ctx, stream, natsjs.OrderedConsumerConfig{FilterSubjects: []string{filter}})
	if err != nil {
		return fmt.Errorf("demo: check: read %s: %w", stream, err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		return fmt.Errorf("demo: check: read %s: %w", stream, err)
	}
	for left := info.NumPending; left > 0; {
		b, err := c.Fetch(int(min(left, 1000)), natsjs.FetchMaxWait(5*time.Second))
		if err != nil {
			return fmt.Errorf("demo: check: read %s: %w", stream, err)
		}
		got := 0
		for m := range b.Messages() {
			if err := fn(m); err != nil {
				return err
			}
			got++
		}
		if err := b.Error(); err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("demo: check: read %s: %w", stream, err)
		}
		if got == 0 {
			return fmt.Errorf("demo: check: read %s: %d messages missing", stream, left)
		}
		left -= uint64(got)
	}
	return nil
}
