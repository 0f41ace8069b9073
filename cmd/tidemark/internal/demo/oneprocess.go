package demo

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/cmd/tidemark/internal/demofault"
	"github.com/tidemark-io/tidemark/job"
	"github.com/tidemark-io/tidemark/state"
)

// The output of Run (one process) is a job.BlobSink under OutputPrefix
// of the sink's store; CommitPrefix+<id> is the commit of checkpoint id
// (the layout job.BlobSink documents).
const (
	OutputPrefix = "sink/"
	CommitPrefix = OutputPrefix + "commit/"
)

// lineageKey is the key, in the totals owner, of the lineage the state's
// checkpoints belong to (a lineageRun as JSON; see lineageOf).
var lineageKey = []byte("lineage")

// Run runs the word-count job in one process, on the job runtime
// (package job): a Source of words, a Processor over the state's owners
// counts and totals, and a job.BlobSink. The runtime owns recovery,
// checkpoints, commits, GC and the stop; Run refuses the store of another
// job first, and at the end of the source checks exactly-once
// (CheckExactlyOnce) against the committed output and the state of the
// final checkpoint, read back from the store.
//
// Config.Stop stops the job with job.Job.Stop (a final checkpoint, and
// the savepoint Config.StopSavepoint names); ctx's cancellation stops it
// where it is, as a crash would.
func Run(ctx context.Context, cfg Config) (Result, error) {
	cfg = cfg.withDefaults()
	if cfg.Storage == nil || cfg.Sink == nil || cfg.Dir == "" {
		return Result{}, errors.New("demo: run: Storage, Sink and Dir are required")
	}
	// Refuse, reading only, before the runtime takes the writer role
	// (which checks the Storage's store enforces conditional writes).
	if err := checkSinkStore(ctx, cfg); err != nil {
		return Result{}, fmt.Errorf("demo: %w", err)
	}
	if err := (&runner{cfg: cfg}).checkSameJob(ctx); err != nil {
		return Result{}, err
	}
	w := &wordCount{cfg: cfg, faults: demofault.From(ctx), src: NewSource(cfg.Records, cfg.Words)}
	src := &wordSource{w: w}
	var res Result
	lastTick := time.Now()
	jc := job.Config{
		Storage: cfg.Storage, Dir: cfg.Dir,
		Source: src, Processor: w, Sink: job.NewBlobSink(cfg.Sink.bs, OutputPrefix),
		Interval: cfg.Interval, EveryRecords: cfg.EveryRecords, GCEvery: cfg.GCEvery,
		RemoteState: cfg.RemoteState, State: cfg.State, Owners: []string{OwnerCounts, OwnerTotals},
		Logger: cfg.Logger,
		Observe: func(e job.Event) {
			p := Progress{Offset: w.src.Offset(), Records: cfg.Records, Checkpoints: res.Checkpoints, LastCompleted: res.LastID}
			switch e.Kind {
			case "start":
				w.restored = e.Checkpoint
				res.RestoredID, res.StartOffset = e.Checkpoint, w.src.Offset()
				p.Event, p.From = "start", e.Checkpoint
			case "checkpoint":
				res.Checkpoints++
				res.LastID = e.Checkpoint
				p.Event, p.Checkpoints, p.LastCompleted = "checkpoint", res.Checkpoints, e.Checkpoint
			case "batch":
				if time.Since(lastTick) < time.Second {
					return
				}
				lastTick = time.Now()
				p.Event = "records"
			default:
				return
			}
			if cfg.Progress != nil {
				cfg.Progress(p)
			}
		},
	}
	j, err := job.Start(ctx, jc)
	if err != nil {
		return res, fmt.Errorf("demo: %w", err)
	}
	jres, err := waitOrStop(ctx, j, cfg)
	res.Action, res.Savepoint = jres.Action, jres.Savepoint
	res.EndOffset = w.src.Offset()
	if w.err != nil && errors.Is(err, w.err) {
		err = w.err // the processor's own error, said once
	}
	if err != nil {
		if errors.Is(err, checkpoint.ErrFenced) {
			err = fmt.Errorf("demo: fenced: another node took over this job; this one stops without touching it: %w", err)
		}
		return res, err
	}
	if w.src.Offset() < cfg.Records {
		res.Stopped = true
		return res, nil
	}
	res.Check, err = w.check(ctx, max(res.LastID, res.RestoredID))
	if cfg.Progress != nil {
		cfg.Progress(Progress{Event: "done", Offset: w.src.Offset(), Records: cfg.Records, Checkpoints: res.Checkpoints, LastCompleted: res.LastID})
	}
	if err != nil {
		return res, err
	}
	if !res.Check.OK() {
		return res, fmt.Errorf("%w: %s", ErrNotExactlyOnce, res.Check)
	}
	return res, nil
}

// waitOrStop waits for j, stopping it with a final checkpoint when
// cfg.Stop closes first.
func waitOrStop(ctx context.Context, j *job.Job, cfg Config) (job.Result, error) {
	done := make(chan struct{})
	var res job.Result
	var err error
	go func() { res, err = j.Wait(); close(done) }()
	select {
	case <-done:
		return res, err
	case <-cfg.Stop:
	}
	sres, serr := j.Stop(ctx, job.StopOptions{Savepoint: cfg.StopSavepoint})
	if errors.Is(serr, checkpoint.ErrSavepointExists) {
		// Refused before stopping: stop all the same, and say why there
		// is no savepoint.
		sres, err2 := j.Stop(ctx, job.StopOptions{})
		return sres, errors.Join(err2, fmt.Errorf("demo: stopped without the savepoint: %w", serr))
	}
	return sres, serr
}

// wordSource is the job's Source: Source's records, Batch at a time,
// Key the word; offsets as Offsets' JSON.
type wordSource struct{ w *wordCount }

func (s *wordSource) Seek(_ context.Context, offsets []byte) error {
	if offsets == nil {
		s.w.src.Seek(0)
		s.w.start = 0
		return nil
	}
	o, err := DecodeOffsets(offsets)
	if err != nil {
		return err
	}
	if o.Records != s.w.src.Records() || o.Words != s.w.src.Words() {
		return fmt.Errorf("%w: offsets %s are of another job", ErrJobMismatch, offsets)
	}
	s.w.src.Seek(o.Next)
	s.w.start = s.w.src.Offset()
	return nil
}

func (s *wordSource) Next(ctx context.Context) ([]job.Record, error) {
	src := s.w.src
	if src.Done() {
		return nil, io.EOF
	}
	if slow := s.w.faults.Slow; slow > 0 {
		select {
		case <-time.After(slow):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	buf := make([]string, s.w.cfg.Batch)
	recs := make([]job.Record, src.Next(buf))
	for i := range recs {
		recs[i] = job.Record{Key: []byte(buf[i])}
	}
	return recs, nil
}

func (s *wordSource) Offsets() ([]byte, error) { return EncodeOffsets(s.w.src.Offsets()), nil }

// wordCount is the job's Processor: it adds each batch to the counts and
// outputs, per word of the batch, the count it gained (Value: 8 bytes,
// big-endian). It also decides, at its first batch, the lineage and the
// output base of the run (before the run commits anything), and injects
// the crash of demofault.Faults.CrashAfter.
type wordCount struct {
	cfg    Config
	faults demofault.Faults
	src    *Source

	restored string // the checkpoint the runtime restored ("": fresh)
	start    uint64 // the offset Seek positioned the source at
	begun    bool
	base     Base
	err      error // the error Process returned
}

func (w *wordCount) Process(ctx context.Context, st *state.Store, in []job.Record) ([]job.Record, error) {
	out, err := w.process(ctx, st, in)
	w.err = err
	return out, err
}

func (w *wordCount) process(ctx context.Context, st *state.Store, in []job.Record) ([]job.Record, error) {
	cnt, err := openCounts(st)
	if err != nil {
		return nil, err
	}
	if !w.begun {
		if err := w.begin(ctx, cnt); err != nil {
			return nil, err
		}
		w.begun = true
	}
	delta := make(map[string]uint64, min(len(in), w.cfg.Words))
	for _, r := range in {
		delta[string(r.Key)]++
	}
	if err := cnt.add(delta, uint64(len(in))); err != nil {
		return nil, err
	}
	out := make([]job.Record, 0, len(delta))
	for _, word := range slices.Sorted(maps.Keys(delta)) {
		out = append(out, job.Record{Key: []byte(word), Value: be(delta[word])})
	}
	if err := w.crash(ctx, uint64(len(in))); err != nil {
		return nil, err
	}
	return out, nil
}

// begin checks that the state agrees with the offsets, records the run's
// lineage in the state and decides the output base (see outputBase).
func (w *wordCount) begin(ctx context.Context, cnt *counts) error {
	start := w.start
	if total, err := cnt.total(); err != nil {
		return err
	} else if total != start {
		return fmt.Errorf("demo: checkpoint %s: state holds %d records but the offsets say %d", w.restored, total, start)
	}
	cp, err := w.restoredRecord(ctx)
	if err != nil {
		return err
	}
	stored, err := readLineage(cnt)
	if err != nil {
		return err
	}
	lr, err := lineageOf(ctx, w.cfg.Storage.LoadSpecific, cp, stored)
	if err != nil {
		return err
	}
	if !slices.Equal(lr.closed, stored.closed) || lr.after != stored.after {
		b, _ := json.Marshal(storedLineage{Closed: lr.closed, After: lr.after})
		if err := cnt.totals.Set(lineageKey, b); err != nil {
			return fmt.Errorf("demo: state: lineage: %w", err)
		}
	}
	w.base, err = outputBase(ctx, w.cfg.Sink.bs, w.committedThrough, cp, start)
	return err
}

func (w *wordCount) restoredRecord(ctx context.Context) (*checkpoint.CheckpointData, error) {
	if w.restored == "" {
		return nil, nil
	}
	cp, err := w.cfg.Storage.LoadSpecific(ctx, w.restored)
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	return cp, nil
}

// crash is demofault.Faults.CrashAfter: once per store (a marker), when
// the offset reaches it.
func (w *wordCount) crash(ctx context.Context, n uint64) error {
	at := w.faults.CrashAfter
	if at == 0 || w.src.Offset() < at || w.src.Offset()-n >= at {
		return nil
	}
	bs := w.cfg.Sink.bs
	marker := fmt.Sprintf("%s%d", CrashMarkerPrefix, at)
	if done, err := bs.Exists(ctx, marker); err != nil || done {
		return err
	}
	if err := bs.Put(ctx, marker, strings.NewReader(time.Now().UTC().Format(time.RFC3339))); err != nil {
		return fmt.Errorf("demo: write crash marker: %w", err)
	}
	if w.faults.Crash != nil {
		w.faults.Crash() // the CLI's never returns
	}
	return fmt.Errorf("demo: at offset %d: %w", w.src.Offset(), ErrCrashed)
}

// committedThrough reports whether the output holds a commit of a
// checkpoint at or below id.
func (w *wordCount) committedThrough(ctx context.Context, id string) (bool, error) {
	for info, err := range w.cfg.Sink.bs.List(ctx, CommitPrefix) {
		if err != nil {
			return false, fmt.Errorf("demo: output: %w", err)
		}
		got := strings.TrimPrefix(info.Key, CommitPrefix)
		if got > id {
			return false, nil // listed in order
		}
		if checkpoint.ValidateID(got) == nil {
			return true, nil
		}
	}
	return false, nil
}

// check runs the exactly-once check at the final checkpoint id: its
// state, read back from the store, and the committed output of its
// lineage.
func (w *wordCount) check(ctx context.Context, id string) (Check, error) {
	st := w.cfg.Storage
	cp, err := st.LoadLatestCompleted(ctx)
	if err != nil {
		return Check{}, fmt.Errorf("demo: check: %w", err)
	}
	if cp == nil || cp.ID != id {
		return Check{}, fmt.Errorf("demo: check: the latest completed checkpoint is %v, not this run's last %q", cp, id)
	}
	if !w.begun {
		// Nothing read this run (a rerun of a finished job): the base
		// is decided now.
		if w.base, err = outputBase(ctx, w.cfg.Sink.bs, w.committedThrough, cp, w.src.Offset()); err != nil {
			return Check{}, err
		}
	}
	got, total, stored, err := w.finalState(ctx, cp)
	if err != nil {
		return Check{}, err
	}
	lr, err := lineageOf(ctx, w.cfg.Storage.LoadSpecific, cp, stored)
	if err != nil {
		return Check{}, err
	}
	lin := lr.through(cp.ID)
	out, err := blobOutput(ctx, w.cfg.Sink.bs, OutputPrefix, lin.Includes)
	if err != nil {
		return Check{}, err
	}
	c := checkExactlyOnce(w.src, out, got, w.base, lin)
	if total != w.src.Records() {
		c.StateWrong++
		c.StateDiff = append(c.StateDiff, fmt.Sprintf("records in the state: got %d, want %d", total, w.src.Records()))
	}
	return c, nil
}

// finalState opens the state of cp from the store (as a new node would)
// and reads its counts, record total and lineage.
func (w *wordCount) finalState(ctx context.Context, cp *checkpoint.CheckpointData) (map[string]uint64, uint64, lineageRun, error) {
	st := w.cfg.Storage
	if err := checkpoint.Materialize(ctx, st, cp); err != nil {
		return nil, 0, lineageRun{}, fmt.Errorf("demo: check: restore %s: %w", cp.ID, err)
	}
	work, err := os.MkdirTemp(w.cfg.Dir, "check-")
	if err != nil {
		return nil, 0, lineageRun{}, err
	}
	defer os.RemoveAll(work)
	opts := w.cfg.State
	if levels, remote, _ := ParseRemoteState(w.cfg.RemoteState); remote {
		// Every open labels what it creates uniquely: a check creates
		// nothing the job's own state could have named.
		opts.Remote = state.RemoteOptions{Store: st.(checkpoint.BlobstoreBacked).Blobstore(),
			Prefix: blobstorage.RemotePrefix, Generation: "check", Levels: levels}
	}
	s, err := state.OpenCheckpoint(ctx, st.StateDir(cp.ID), filepath.Join(work, "state"), opts)
	if err != nil {
		return nil, 0, lineageRun{}, fmt.Errorf("demo: check: open state of %s: %w", cp.ID, err)
	}
	defer s.Close()
	cnt, err := openCounts(s)
	if err != nil {
		return nil, 0, lineageRun{}, err
	}
	got, err := cnt.all()
	if err != nil {
		return nil, 0, lineageRun{}, err
	}
	total, err := cnt.total()
	if err != nil {
		return nil, 0, lineageRun{}, err
	}
	lr, err := readLineage(cnt)
	return got, total, lr, err
}

// readLineage reads the lineage the state records (zero: none).
func readLineage(cnt *counts) (lineageRun, error) {
	var sl storedLineage
	b, ok, err := cnt.totals.Get(lineageKey)
	if err != nil || !ok {
		return lineageRun{}, err
	}
	if err := json.Unmarshal(b, &sl); err != nil {
		return lineageRun{}, fmt.Errorf("%w: state: lineage: %v", ErrCorruptOutput, err)
	}
	return lineageRun{closed: sl.Closed, after: sl.After}, nil
}

// storedLineage is a lineageRun as the state records it.
type storedLineage struct {
	Closed Lineage `json:"closed,omitempty"`
	After  string  `json:"after,omitempty"`
}

// blobOutput sums the committed output of the job.BlobSink under prefix
// of the transactions keep accepts (by checkpoint id): its Output over a
// view of the store that lists only their commits.
func blobOutput(ctx context.Context, bs blobstore.Blobstore, prefix string, keep func(id string) bool) (Output, error) {
	v := &commitView{Blobstore: bs, commits: prefix + "commit/", keep: keep}
	out := Output{Counts: map[string]uint64{}}
	for rec, err := range job.NewBlobSink(v, prefix).Output(ctx) {
		if err != nil {
			return Output{}, fmt.Errorf("%w: %v", ErrCorruptOutput, err)
		}
		if len(rec.Value) != 8 {
			return Output{}, fmt.Errorf("%w: record %q: value of %d bytes", ErrCorruptOutput, rec.Key, len(rec.Value))
		}
		out.Counts[string(rec.Key)] += binary.BigEndian.Uint64(rec.Value)
	}
	out.Committed, out.Abandoned = v.included, v.excluded
	return out, nil
}

// commitView is a Blobstore whose listing of commits holds only those
// keep accepts; it counts those it shows and hides.
type commitView struct {
	blobstore.Blobstore
	commits            string // the sink's prefix of commits
	keep               func(id string) bool
	included, excluded int
}

func (v *commitView) List(ctx context.Context, prefix string) iter.Seq2[blobstore.ObjectInfo, error] {
	if prefix != v.commits {
		return v.Blobstore.List(ctx, prefix)
	}
	return func(yield func(blobstore.ObjectInfo, error) bool) {
		for info, err := range v.Blobstore.List(ctx, prefix) {
			if err == nil {
				if !v.keep(strings.TrimPrefix(info.Key, v.commits)) {
					v.excluded++
					continue
				}
				v.included++
			}
			if !yield(info, err) {
				return
			}
		}
	}
}
