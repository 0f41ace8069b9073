package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/tidemark-io/tidemark/job"
)

// SourceConfig configures a Source.
type SourceConfig struct {
	// Stream is the input stream; its partitions are "<Stream>.<p>".
	Stream string
	// Partitions are the partitions this source reads, for example the
	// ones a worker was assigned. Empty is an error.
	Partitions []int
	// MaxRecords bounds the records of one batch (default 1000).
	MaxRecords int
	// MaxBytes bounds the value and key bytes of one batch (default 1 MiB);
	// a single larger record still makes a batch of its own.
	MaxBytes int
	// Wait is how long Next waits for a first record before it returns an
	// empty batch (default 100 ms).
	Wait time.Duration
	// InFlight bounds the messages the server may push ahead of Next, per
	// partition (default 256). Memory is bounded by about
	// len(Partitions)*InFlight + MaxRecords messages, each at most the
	// server's max_payload (1 MiB by default).
	InFlight int
	// Heartbeat is how often the server proves a partition's consumer
	// alive while it has nothing to send (default 2s); two missed ones
	// make the client recreate the consumer, as after its node died.
	Heartbeat time.Duration
	// StallAfter is how long a partition may deliver nothing while the
	// stream holds a message after its position before the source
	// replaces its consumer (default 10s). nats.go's ordered consumer
	// recovers from most failures itself, but was seen to stall for
	// minutes after a cluster node's death.
	StallAfter time.Duration
	// StopAtEnd makes the source bounded: at Seek it notes each
	// partition's last sequence, and Next returns io.EOF once every
	// partition has been read up to it.
	StopAtEnd bool
}

// Offsets is the JSON document a Source records in every checkpoint: for
// each partition it reads, the stream sequence of the last record Next
// returned (0: none yet).
type Offsets struct {
	Stream     string            `json:"stream"`
	Partitions map[string]uint64 `json:"partitions"`
}

// Source reads the partitions of a JetStream stream (job.Source).
//
// Each partition is read by its own ordered consumer filtered to
// "<stream>.<p>" and started at the sequence after the checkpointed one.
// An ordered consumer is ephemeral, unacknowledged and kept in order by
// the client: after a gap, a reconnect or a server restart it is
// recreated from the last sequence it delivered, so the source sees each
// message once and in order, and no consumer state lives on the server
// between runs (the checkpoint is the only position). Pulls are bounded
// by InFlight messages per partition, and a handler
// that blocks on a full buffer stops further pulls, so a slow job holds a
// bounded number of messages.
type Source struct {
	js  natsjs.JetStream
	cfg SourceConfig

	seeked bool
	st     natsjs.Stream
	last   map[int]uint64    // last sequence returned, per partition
	gen    map[int]int       // generation of each partition's consumer
	seen   map[int]time.Time // last progress (or proof of none due)
	bound  map[int]uint64    // StopAtEnd: last sequence to read, per partition
	done   map[int]bool      // StopAtEnd: partition read up to its bound

	ch      chan delivered
	stop    chan struct{}
	errs    chan error
	held    *delivered // taken off ch but over a batch's byte limit
	mu      sync.Mutex
	consume map[int]natsjs.ConsumeContext
	closed  bool
}

// delivered is one message handed over by a partition's consumer.
type delivered struct {
	p   int
	gen int // the consumer generation that delivered it
	seq uint64
	rec job.Record
}

var _ job.Source = (*Source)(nil)

// NewSource returns a source on js reading cfg.Partitions of cfg.Stream.
// It starts reading at Seek.
func NewSource(js natsjs.JetStream, cfg SourceConfig) (*Source, error) {
	if err := validName(cfg.Stream); err != nil {
		return nil, err
	}
	if len(cfg.Partitions) == 0 {
		return nil, fmt.Errorf("%w: no partitions to read", ErrConfig)
	}
	seen := map[int]bool{}
	for _, p := range cfg.Partitions {
		if p < 0 || seen[p] {
			return nil, fmt.Errorf("%w: partitions %v: each must be >= 0 and listed once", ErrConfig, cfg.Partitions)
		}
		seen[p] = true
	}
	if cfg.MaxRecords <= 0 {
		cfg.MaxRecords = 1000
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = 1 << 20
	}
	if cfg.Wait <= 0 {
		cfg.Wait = 100 * time.Millisecond
	}
	if cfg.InFlight <= 0 {
		cfg.InFlight = 256
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = 2 * time.Second
	}
	if cfg.StallAfter <= 0 {
		cfg.StallAfter = 10 * time.Second
	}
	cfg.Partitions = slices.Clone(cfg.Partitions)
	slices.Sort(cfg.Partitions)
	return &Source{
		js:      js,
		cfg:     cfg,
		last:    map[int]uint64{},
		gen:     map[int]int{},
		seen:    map[int]time.Time{},
		bound:   map[int]uint64{},
		done:    map[int]bool{},
		ch:      make(chan delivered, cfg.MaxRecords),
		stop:    make(chan struct{}),
		errs:    make(chan error, len(cfg.Partitions)),
		consume: map[int]natsjs.ConsumeContext{},
	}, nil
}

// Seek positions every partition just after its sequence in offsets (a
// document Offsets returned; nil means the beginning) and starts reading.
// Partitions of offsets this source does not read are ignored; partitions
// it reads but offsets lacks start at the beginning.
func (s *Source) Seek(ctx context.Context, offsets []byte) error {
	if s.seeked {
		return errors.New("jetstream: Seek called twice")
	}
	if offsets != nil {
		var o Offsets
		if err := json.Unmarshal(offsets, &o); err != nil {
			return fmt.Errorf("%w: %v", ErrOffsets, err)
		}
		if o.Stream != s.cfg.Stream {
			return fmt.Errorf("%w: offsets of stream %q, the source reads %q", ErrOffsets, o.Stream, s.cfg.Stream)
		}
		for k, seq := range o.Partitions {
			p, err := strconv.Atoi(k)
			if err != nil || p < 0 {
				return fmt.Errorf("%w: partition %q", ErrOffsets, k)
			}
			if slices.Contains(s.cfg.Partitions, p) {
				s.last[p] = seq
			}
		}
	}
	var st natsjs.Stream
	if err := retry(ctx, func(rctx context.Context) error {
		var err error
		st, err = s.js.Stream(rctx, s.cfg.Stream)
		return err
	}); err != nil {
		return fmt.Errorf("jetstream: input stream %s: %w", s.cfg.Stream, err)
	}
	s.st = st
	first := st.CachedInfo().State.FirstSeq
	for _, p := range s.cfg.Partitions {
		s.seen[p] = time.Now()
		// Messages between the checkpoint and the stream's first sequence
		// are gone; resuming would silently skip some.
		if last := s.last[p]; last > 0 && first > last+1 {
			return fmt.Errorf("%w: partition %d resumes after %d, the stream starts at %d", ErrTruncated, p, last, first)
		}
		if s.cfg.StopAtEnd {
			var m *natsjs.RawStreamMsg
			err := retry(ctx, func(rctx context.Context) error {
				var err error
				m, err = st.GetLastMsgForSubject(rctx, PartitionSubject(s.cfg.Stream, p))
				return err
			})
			switch {
			case errors.Is(err, natsjs.ErrMsgNotFound):
				s.bound[p] = 0
			case err != nil:
				return fmt.Errorf("jetstream: last message of partition %d: %w", p, err)
			default:
				s.bound[p] = m.Sequence
			}
			if s.last[p] >= s.bound[p] {
				s.done[p] = true
				continue
			}
		}
		if err := s.start(ctx, st, p); err != nil {
			s.Close()
			return err
		}
	}
	s.seeked = true
	return nil
}

// start runs partition p's ordered consumer from the sequence after its
// checkpoint.
func (s *Source) start(ctx context.Context, st natsjs.Stream, p int) error {
	cfg := natsjs.OrderedConsumerConfig{FilterSubjects: []string{PartitionSubject(s.cfg.Stream, p)}}
	if last := s.last[p]; last > 0 {
		cfg.DeliverPolicy = natsjs.DeliverByStartSequencePolicy
		cfg.OptStartSeq = last + 1
	}
	// The create may meet a leader election: retry it like every request.
	var cons natsjs.Consumer
	err := retry(ctx, func(rctx context.Context) error {
		var err error
		cons, err = st.OrderedConsumer(rctx, cfg)
		return err
	})
	if err != nil {
		return fmt.Errorf("jetstream: consumer of partition %d: %w", p, err)
	}
	s.gen[p]++
	gen := s.gen[p]
	cc, err := cons.Consume(func(m natsjs.Msg) {
		md, err := m.Metadata()
		var rec job.Record
		if err == nil {
			rec, err = recordOf(m.Headers(), m.Data())
		}
		if err != nil {
			s.fail(fmt.Errorf("jetstream: partition %d: %w", p, err))
			return
		}
		// Blocking here stops this consumer's pulls: the bound on memory.
		select {
		case s.ch <- delivered{p: p, gen: gen, seq: md.Sequence.Stream, rec: rec}:
		case <-s.stop:
		}
		// No byte limit on the pull: a message larger than it is never
		// delivered, and the pull spins.
	}, natsjs.PullMaxMessages(s.cfg.InFlight),
		// A consumer on a node that died is noticed by missed heartbeats,
		// then recreated: 30s by default is too long a stall.
		natsjs.PullHeartbeat(s.cfg.Heartbeat))
	if err != nil {
		return fmt.Errorf("jetstream: consume partition %d: %w", p, err)
	}
	s.mu.Lock()
	s.consume[p] = cc
	s.mu.Unlock()
	return nil
}

func (s *Source) fail(err error) {
	select {
	case s.errs <- err:
	default:
	}
}

// Next returns the next batch: at most MaxRecords records and about
// MaxBytes bytes, across the partitions in arrival order (each partition
// in its stream order). It returns an empty batch when nothing arrives
// within Wait, and io.EOF when StopAtEnd is set and every partition has
// been read to its end.
func (s *Source) Next(ctx context.Context) ([]job.Record, error) {
	if !s.seeked {
		return nil, errors.New("jetstream: Next before Seek")
	}
	var out []job.Record
	size := 0
	timer := time.NewTimer(s.cfg.Wait)
	defer timer.Stop()
	for len(out) < s.cfg.MaxRecords {
		if s.allDone() && s.held == nil && len(s.ch) == 0 {
			if len(out) == 0 {
				return nil, io.EOF
			}
			break
		}
		var d delivered
		switch {
		case s.held != nil:
			d, s.held = *s.held, nil
		case len(out) == 0:
			select {
			case d = <-s.ch:
			case err := <-s.errs:
				return nil, err
			case <-timer.C:
				s.unstall(ctx)
				return out, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		default:
			select {
			case d = <-s.ch:
			default:
				return out, nil
			}
		}
		if d.gen != s.gen[d.p] || d.seq <= s.last[d.p] {
			continue // from a replaced consumer, or already returned
		}
		if s.cfg.StopAtEnd && (s.done[d.p] || d.seq > s.bound[d.p]) {
			continue // past the end noted at Seek
		}
		n := len(d.rec.Key) + len(d.rec.Value)
		if len(out) > 0 && size+n > s.cfg.MaxBytes {
			s.held = &d
			break
		}
		out = append(out, d.rec)
		size += n
		s.last[d.p] = d.seq
		s.seen[d.p] = time.Now()
		if s.cfg.StopAtEnd && d.seq >= s.bound[d.p] {
			s.done[d.p] = true
			s.stopPartition(d.p)
		}
	}
	return out, nil
}

// unstall replaces the consumer of every partition that delivered nothing
// for StallAfter although the stream holds a message after its position.
// It runs when a wait for records timed out, so the buffer is empty and
// no consumer is blocked on it. The new consumer starts after the last
// sequence returned; messages of the old one are dropped by generation.
func (s *Source) unstall(ctx context.Context) {
	for _, p := range s.cfg.Partitions {
		if s.done[p] || time.Since(s.seen[p]) < s.cfg.StallAfter {
			continue
		}
		rctx, cancel := request(ctx)
		_, err := s.st.GetMsg(rctx, s.last[p]+1, natsjs.WithGetMsgSubject(PartitionSubject(s.cfg.Stream, p)))
		cancel()
		switch {
		case errors.Is(err, natsjs.ErrMsgNotFound):
			s.seen[p] = time.Now() // nothing due: not stalled
			continue
		case err != nil:
			continue // the cluster may be electing: look again later
		}
		s.stopPartition(p)
		if err := s.start(ctx, s.st, p); err != nil {
			continue // no consumer now: the next timeout tries again
		}
		s.seen[p] = time.Now()
	}
}

func (s *Source) allDone() bool {
	if !s.cfg.StopAtEnd {
		return false
	}
	for _, p := range s.cfg.Partitions {
		if !s.done[p] {
			return false
		}
	}
	return true
}

func (s *Source) stopPartition(p int) {
	s.mu.Lock()
	cc := s.consume[p]
	delete(s.consume, p)
	s.mu.Unlock()
	if cc != nil {
		cc.Stop()
	}
}

// Offsets returns the sequence of the last record Next returned, per
// partition, as an Offsets document.
func (s *Source) Offsets() ([]byte, error) {
	o := Offsets{Stream: s.cfg.Stream, Partitions: make(map[string]uint64, len(s.cfg.Partitions))}
	for _, p := range s.cfg.Partitions {
		o.Partitions[strconv.Itoa(p)] = s.last[p]
	}
	return json.Marshal(o)
}

// Close stops the consumers. The source cannot be used afterwards.
func (s *Source) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	ccs := s.consume
	s.consume = map[int]natsjs.ConsumeContext{}
	close(s.stop)
	s.mu.Unlock()
	for _, cc := range ccs {
		cc.Stop()
	}
	return nil
}
