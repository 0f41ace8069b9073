package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/internal/demofault"
	"github.com/tidemark-io/tidemark/state"
)

// Defaults of Config.
const (
	DefaultRecords  = 200_000
	DefaultBatch    = 1000
	DefaultInterval = 2 * time.Second
	DefaultGCEvery  = 5
)

// CrashMarkerPrefix starts the key of the marker a run writes before its
// injected crash (Config.CrashAfter), so that the crash happens once.
const CrashMarkerPrefix = "demo/crashed-at-"

// TxnID is the sink's transactional id. Run records TxnIDOf(writer),
// TxnID@<writer>, in every checkpoint, naming the writer whose staged
// output the checkpoint's transaction commits.
const TxnID = "tidemark-demo-wordcount"

// Errors of Run.
var (
	// ErrCrashed is returned (wrapped) when the run stopped at an injected
	// crash (Config.CrashAfter without Config.Crash, or a Config.Hook that
	// returned checkpoint.HookHalt): nothing after the crash point was
	// done, exactly as if the process had died. Run again to resume.
	ErrCrashed = errors.New("demo: crashed (injected)")
	// ErrNotExactlyOnce is returned (wrapped) when the final check finds
	// the committed output or the state different from the expected
	// counts.
	ErrNotExactlyOnce = errors.New("demo: exactly-once check failed")
	// ErrJobMismatch is returned (wrapped) when the store holds a job with
	// other parameters (records, words) than the ones given.
	ErrJobMismatch = errors.New("demo: the store holds another job")
)

// Config describes one run of the word-count job. Storage, Sink and Dir
// are required; every other zero field takes the default documented on it.
type Config struct {
	// Storage keeps the checkpoints: a blobstorage.Storage (the demo's
	// normal case: checkpoints in a Blobstore, resumable from any node) or
	// a checkpoint.FileStorage. A Storage with an
	// Acquire(ctx) (uint64, error) method (BlobStorage) is acquired first,
	// which fences any previous writer.
	Storage checkpoint.Storage
	// Sink is the transactional output. When Storage has a writer role,
	// Run names its transactions by the epoch it acquires (a Sink on the
	// same store, writer "e<epoch>"), so that no other writer's staged
	// output can ever be committed as this run's.
	Sink *Sink
	// Dir is the local working directory; the live state is Dir/live. It
	// may be empty or absent: the state comes from the checkpoint.
	Dir string

	// Records is the number of records of the source. Default:
	// DefaultRecords.
	Records uint64
	// Words is the source's vocabulary size. Default: DefaultWords.
	Words int
	// Batch is the number of records read and applied at a time; a
	// checkpoint is taken between batches. Default: DefaultBatch.
	Batch int
	// Interval is the time between checkpoints. Default: DefaultInterval.
	Interval time.Duration
	// EveryRecords, if not zero, also takes a checkpoint every that many
	// records (whichever of Interval and EveryRecords comes first).
	EveryRecords uint64

	// GC, if set, is called after every GCEvery completed checkpoints
	// (BlobStorage.GC for the demo). An error wrapping checkpoint.ErrFenced
	// stops the run; other errors are logged.
	GC func(ctx context.Context) error
	// GCEvery: default DefaultGCEvery.
	GCEvery int
	// PruneLocal removes the local state directory of each checkpoint
	// once a newer one completed. Set it when Storage keeps state
	// elsewhere (BlobStorage); never with FileStorage, whose local state
	// directories are the checkpoints.
	PruneLocal bool
	// State configures the Pebble state. The demo's default keeps memory
	// small (1 MiB memtables, 4 MiB cache) so that SSTs are written, and
	// checkpoints are incremental, even for a small run.
	State state.Options
	// RemoteState, if not RemoteStateOff, runs the state in remote mode
	// (instant restore; see remote.go): RemoteStateAll or
	// RemoteStateLower. Storage must be a blobstorage.Storage.
	RemoteState string

	// Stop, if not nil, stops the run gracefully once closed: it reads no
	// further batch, takes a final checkpoint of every record it read,
	// waits for it to complete (its sink transaction committed) and
	// returns with Result.Stopped set and no exactly-once check. A resume
	// then starts at that checkpoint: nothing read before the stop is
	// read again. A stop that cannot complete its checkpoint (the store
	// down) waits; cancel ctx to bound it: the run then stops as on a
	// crash.
	Stop <-chan struct{}

	// Progress, if set, receives progress events: at the start, after
	// every completed checkpoint, about once a second while records flow,
	// and at the end. Called from the run's goroutine.
	Progress func(Progress)
	// Logger receives warnings (failed GC, advisory errors). Default: discard.
	Logger *slog.Logger
}

// Progress is a progress event of Run.
type Progress struct {
	// Event is "start", "records", "checkpoint" or "done".
	Event string
	// Offset is the source offset (records consumed in total); Records is
	// the source's size.
	Offset, Records uint64
	// Checkpoints is the number of checkpoints completed by this run;
	// LastCompleted the id of the last one.
	Checkpoints   int
	LastCompleted string
	// Action and From describe the start: what recovery decided and the
	// checkpoint restored ("" when starting fresh).
	Action string
	From   string
}

// Result is what Run did.
type Result struct {
	// Action is recovery's decision (start-fresh, restore, promote) and
	// RestoredID the checkpoint it restored ("" when starting fresh).
	Action     checkpoint.Action
	RestoredID string
	// Abandoned is the prepared checkpoint recovery abandoned, if any.
	Abandoned string
	// StartOffset is the source offset the run resumed from, EndOffset
	// where it stopped.
	StartOffset, EndOffset uint64
	// Checkpoints is the number of checkpoints this run completed, and
	// LastID the id of the last one.
	Checkpoints int
	LastID      string
	// Check is the exactly-once check (zero if the run did not reach it).
	Check Check
	// Stopped is set when Config.Stop stopped the run before the end of
	// the source: LastID is then its final checkpoint, at EndOffset.
	Stopped bool
}

// withDefaults fills the zero fields of c.
func (c Config) withDefaults() Config {
	if c.Records == 0 {
		c.Records = DefaultRecords
	}
	if c.Words <= 0 {
		c.Words = DefaultWords
	}
	if c.Batch <= 0 {
		c.Batch = DefaultBatch
	}
	if c.Interval <= 0 {
		c.Interval = DefaultInterval
	}
	if c.GCEvery <= 0 {
		c.GCEvery = DefaultGCEvery
	}
	if c.State.MemTableSize == 0 {
		c.State.MemTableSize = 1 << 20
	}
	if c.State.CacheSize == 0 {
		c.State.CacheSize = 4 << 20
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// acquirer is implemented by a Storage with a writer role (BlobStorage).
type acquirer interface {
	Acquire(ctx context.Context) (uint64, error)
}

// Run runs the word-count job to the end of its source, resuming from the
// latest checkpoint in cfg.Storage, and then checks that the committed
// output and the state hold every record exactly once.
//
// On start it checks that the stores it writes to enforce conditional
// writes (Acquire checks the Storage's Blobstore; blobstore.CheckConditionalWrites
// the Sink's, if it is another) and refuses to run when one does not, then takes the writer
// role (Acquire, for storages that have one), lets checkpoint.Recover decide what to restore (asking the sink
// whether a prepared checkpoint's transaction committed), aborts every
// transaction that cannot commit any more, materializes the checkpoint's
// state directories (downloading them from the store on an empty node),
// opens the state from them and seeks the source to the checkpoint's
// offsets. It then reads the source in batches, folds each into the
// state and into the output of the current checkpoint, and every
// Interval (or EveryRecords) takes a checkpoint through the Coordinator's
// two-phase protocol. At the end of the source it takes a final
// checkpoint, waits for it to complete, and runs CheckExactlyOnce.
//
// A job resumed from a savepoint restored out of another store (whose
// sink holds the output before the savepoint) is checked for what this
// store holds: the state over every record, the committed output over the
// records from the savepoint's offset on. Run recognises that start (a
// restored completed checkpoint whose output this store's sink does not
// hold) and records it at BaseKey before committing anything; see Base.
// A job rolled back to a savepoint on the same store (a new lineage) is
// checked for the output of its lineage, which every checkpoint records;
// see Lineage.
//
// A writer that finds itself fenced (another node acquired the writer
// role: this one is a zombie) stops at once with an error wrapping
// checkpoint.ErrFenced that starts "demo: fenced: another node took
// over". It aborts nothing on its way out: the node that took over owns
// every transaction decision, including those of ids this node staged.
//
// A cancelled ctx stops the run where it is, like a crash, with ctx's
// error. The returned Result is filled as far as the run got.
func Run(ctx context.Context, cfg Config) (Result, error) {
	cfg = cfg.withDefaults()
	if cfg.Storage == nil || cfg.Sink == nil || cfg.Dir == "" {
		return Result{}, errors.New("demo: run: Storage, Sink and Dir are required")
	}
	if err := checkRemoteConfig(cfg); err != nil {
		return Result{}, err
	}
	r := &runner{cfg: cfg, faults: demofault.From(ctx), src: NewSource(cfg.Records, cfg.Words)}
	res, err := r.run(ctx)
	if cerr := r.close(); cerr != nil && err == nil {
		err = cerr
	}
	if errors.Is(err, checkpoint.ErrFenced) {
		// Stop at once and say why: this node is a zombie. It has not
		// aborted its open transaction (the Coordinator does not abort
		// when fenced): the node that took over decides it.
		err = fmt.Errorf("demo: fenced: another node took over this job; this one stops without touching it: %w", err)
	}
	return res, err
}

// checkSameJob refuses, reading only, a store whose checkpoints belong to
// a job with other parameters.
func (r *runner) checkSameJob(ctx context.Context) error {
	return checkPointed(ctx, r.cfg.Storage, r.sameJob)
}

// checkPointed runs check, reading only, on the checkpoints st's pointers
// name: the latest completed one, then the latest (when there are).
func checkPointed(ctx context.Context, st checkpoint.Storage, check func(*checkpoint.CheckpointData) error) error {
	for _, load := range []func(context.Context) (*checkpoint.CheckpointData, error){st.LoadLatestCompleted, st.Load} {
		cp, err := load(ctx)
		if err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		if cp == nil {
			continue
		}
		if err := check(cp); err != nil {
			return err
		}
	}
	return nil
}

// sameJob checks that cp is a checkpoint of this job (same records and
// words).
func (r *runner) sameJob(cp *checkpoint.CheckpointData) error {
	off, err := DecodeOffsets(cp.Offsets())
	if err != nil {
		return err
	}
	if off.Records != r.cfg.Records || off.Words != r.cfg.Words {
		return fmt.Errorf("%w: checkpoint %s is of a job with %d records and %d words, not %d and %d",
			ErrJobMismatch, cp.ID, off.Records, off.Words, r.cfg.Records, r.cfg.Words)
	}
	if !r.workers {
		if err := oneProcessShape(cp); err != nil {
			return err
		}
	}
	return r.checkStateMode(cp)
}

// runner is the state of one Run.
type runner struct {
	cfg    Config
	faults demofault.Faults // injected by the CLI and tests (internal/demofault)
	src    *Source
	state  *state.Store
	cnt    *counts
	coord  *checkpoint.Coordinator

	lastID  string   // greatest checkpoint id used (any status, any node)
	local   []string // ids whose local state directory this run may prune
	pending map[string]uint64

	completed chan string // ids of completed checkpoints, from OnCompleted
	halted    chan struct{}
	haltOnce  sync.Once

	lineage lineageRun // the lineage of this run's checkpoints

	epoch       uint64 // the writer epoch Acquire took (0: no writer role)
	stopHydrate func() // remote state: stops the background hydration

	workers bool // the probe of RunWorkers: the checkpoints have the workers' owners
}

func (r *runner) close() error {
	if r.coord != nil {
		r.coord.Stop()
	}
	if r.stopHydrate != nil {
		r.stopHydrate()
	}
	if r.state != nil {
		return r.state.Close()
	}
	return nil
}

func (r *runner) progress(p Progress) {
	if r.cfg.Progress != nil {
		p.Records = r.cfg.Records
		r.cfg.Progress(p)
	}
}

func (r *runner) halt() { r.haltOnce.Do(func() { close(r.halted) }) }

func (r *runner) run(ctx context.Context) (Result, error) {
	cfg := r.cfg
	var res Result

	// 1. Take the writer role before reading anything: from here on a
	// previous writer (dead or cut off) can no longer move the pointers,
	// so what Recover reads is what stays. That holds only if the store
	// enforces conditional writes, so check that first: on an endpoint
	// that ignores them nothing is written at all.
	if err := checkSinkStore(ctx, cfg); err != nil {
		return res, fmt.Errorf("demo: %w", err)
	}
	// Every check that can refuse comes before the writer role: a
	// refused run must not fence the job running on the store.
	if err := r.checkSameJob(ctx); err != nil {
		return res, err
	}
	if a, ok := cfg.Storage.(acquirer); ok {
		epoch, err := a.Acquire(ctx)
		if err != nil {
			return res, fmt.Errorf("demo: acquire writer: %w", err)
		}
		r.epoch = epoch
		// Name this run's sink transactions by its epoch: a zombie that
		// uses the same checkpoint id (it never moved _latest to it)
		// stages and commits other objects than ours.
		r.cfg.Sink = cfg.Sink.withEpoch(epoch)
		cfg = r.cfg
	}

	// 2. Decide what to restore.
	dec, err := checkpoint.Recover(ctx, cfg.Storage, cfg.Sink.Committed)
	if err != nil {
		return res, fmt.Errorf("demo: %w", err)
	}
	res.Action = dec.Action
	if dec.Abandoned != nil {
		res.Abandoned = dec.Abandoned.ID
		if err := cfg.Sink.Abort(ctx, dec.Abandoned.ID); err != nil {
			return res, fmt.Errorf("demo: abort abandoned checkpoint: %w", err)
		}
	}
	if _, err := cfg.Sink.Sweep(ctx); err != nil {
		return res, err
	}
	// Never reuse an id: not one a checkpoint record has, nor one the
	// sink has seen (a transaction staged, or aborted above, by a run
	// that crashed before persisting its checkpoint).
	sinkLast, err := cfg.Sink.LastID(ctx)
	if err != nil {
		return res, err
	}
	if dec.Latest != nil {
		r.lastID = dec.Latest.ID
	}
	r.lastID = max(r.lastID, sinkLast)

	// 3. Open the state: from the checkpoint, or empty.
	live := filepath.Join(cfg.Dir, "live")
	if err := os.RemoveAll(live); err != nil {
		return res, fmt.Errorf("demo: clear live state: %w", err)
	}
	var ops operatorState
	stateOpts, remote := r.remoteOptions(r.epoch)
	if cp := dec.Checkpoint; cp != nil {
		res.RestoredID = cp.ID
		if err := r.sameJob(cp); err != nil {
			return res, err
		}
		off, err := DecodeOffsets(cp.Offsets())
		if err != nil {
			return res, err
		}
		if err := checkpoint.Materialize(ctx, cfg.Storage, cp); err != nil {
			return res, fmt.Errorf("demo: materialize %s: %w", cp.ID, err)
		}
		r.state, err = state.OpenCheckpoint(ctx, cfg.Storage.StateDir(cp.ID), live, stateOpts)
		if err != nil {
			return res, fmt.Errorf("demo: open state of %s: %w", cp.ID, err)
		}
		if err := json.Unmarshal(cp.Operators[operatorKey], &ops); err != nil {
			return res, fmt.Errorf("demo: checkpoint %s: operator state: %w", cp.ID, err)
		}
		if r.lineage, err = resumeLineage(cp, ops); err != nil {
			return res, err
		}
		r.src.Seek(off.Next)
		r.local = append(r.local, cp.ID)
	} else {
		r.state, err = state.Open(live, stateOpts)
		if err != nil {
			return res, fmt.Errorf("demo: open state: %w", err)
		}
	}
	if remote {
		r.useRemote(ctx)
	}
	if r.cnt, err = openCounts(r.state); err != nil {
		return res, fmt.Errorf("demo: %w", err)
	}
	// The state must agree with the offsets: both come from one checkpoint.
	if total, err := r.cnt.total(); err != nil {
		return res, err
	} else if total != r.src.Offset() {
		return res, fmt.Errorf("demo: checkpoint %s: state holds %d records but the offsets say %d",
			res.RestoredID, total, r.src.Offset())
	}
	// Where this store's output starts: record 0, or the offset of a
	// savepoint restored here from another store. Decided (and recorded
	// in the store) before this run commits any output, because what
	// tells the two apart is that the sink holds no output yet.
	base, err := outputBase(ctx, cfg.Sink, dec.Checkpoint, r.src.Offset())
	if err != nil {
		return res, err
	}
	res.StartOffset = r.src.Offset()
	res.EndOffset = res.StartOffset
	r.progress(Progress{Event: "start", Offset: r.src.Offset(), Action: dec.Action.String(), From: res.RestoredID})

	// 4. The coordinator.
	r.completed = make(chan string, 16)
	r.halted = make(chan struct{})
	// The record names the writer whose staged output its commit commits
	// (Sink.Committed checks it on recovery).
	c := checkpoint.NewCoordinator(cfg.Storage, TxnIDOf(cfg.Sink.Writer()))
	c.CommitSink = cfg.Sink.Commit
	c.AbortSink = cfg.Sink.Abort
	c.Logger = cfg.Logger
	c.OnCompleted = func(id string) {
		select {
		case r.completed <- id:
		default: // never block the worker; the run waits one at a time
		}
	}
	c.Hook = func(step checkpoint.Step, id string) checkpoint.HookAction {
		select {
		case <-r.halted: // crashed: do nothing more
			return checkpoint.HookHalt
		default:
		}
		if r.faults.Hook == nil {
			return checkpoint.HookContinue
		}
		a := r.faults.Hook(step, id)
		if a == checkpoint.HookHalt {
			r.halt()
		}
		return a
	}
	c.Start(ctx)
	r.coord = c

	// 5. Process.
	stopped, err := r.process(ctx, &res, ops)
	res.EndOffset = r.src.Offset()
	if err != nil || stopped {
		res.Stopped = stopped
		return res, err
	}

	// 6. Check.
	res.Check, err = CheckExactlyOnce(ctx, r.src, cfg.Sink, r.cnt, base, r.lineage.through(max(res.LastID, res.RestoredID)))
	r.progress(Progress{Event: "done", Offset: r.src.Offset(), Checkpoints: res.Checkpoints, LastCompleted: res.LastID})
	if err != nil {
		return res, err
	}
	if !res.Check.OK() {
		return res, fmt.Errorf("%w: %s", ErrNotExactlyOnce, res.Check)
	}
	return res, nil
}

// operatorKey is the key of the job's operator state in
// CheckpointData.Operators.
const operatorKey = "wordcount"

// operatorState is the small, non-native operator state the job records
// in CheckpointData.Operators: diagnostics carried from run to run.
type operatorState struct {
	// Runs counts the runs (starts) that took a checkpoint.
	Runs int `json:"runs"`
	// RemoteState is the Config.RemoteState of the run that took the
	// checkpoint: whether its state is in remote mode.
	RemoteState string `json:"remote_state,omitempty"`
	// Lineage is the history of the checkpoint's output, through its own
	// id: which committed transactions are its output (see Lineage).
	Lineage Lineage `json:"lineage,omitempty"`
}

// process reads the source to its end (or until Config.Stop), checkpointing
// on the way, then takes the final checkpoint and waits for it (see loop).
// stopped reports a stop before the end.
func (r *runner) process(ctx context.Context, res *Result, ops operatorState) (stopped bool, err error) {
	cfg := r.cfg
	ops.Runs++
	ops.RemoteState = cfg.RemoteState
	r.pending = map[string]uint64{}
	l := &loop{
		src: r.src, sink: cfg.Sink, faults: r.faults,
		batch: cfg.Batch, interval: cfg.Interval, every: cfg.EveryRecords,
		completed: r.completed, fatal: r.coord.Fatal(), halted: r.halted, halt: r.halt,
		apply: func(ctx context.Context, words []string) error {
			delta := make(map[string]uint64, min(len(words), cfg.Words))
			for _, w := range words {
				delta[w]++
				r.pending[w]++
			}
			return r.cnt.add(delta, uint64(len(words)))
		},
		cut: func(ctx context.Context) (string, error) {
			id, err := checkpoint.NextID(r.lastID)
			if err != nil {
				return "", fmt.Errorf("demo: %w", err)
			}
			r.lastID = id
			// The barrier: the source position, the state and the output
			// are all cut between the same two batches.
			r.coord.OnBarrierInjected(id, EncodeOffsets(r.src.Offsets()))
			// A local directory of this id can only be the leftover of a
			// run that crashed before persisting it (ids of persisted
			// checkpoints are never reused): clear it, or the state
			// checkpoint refuses.
			if err := removeStateDir(cfg.Storage, id); err != nil {
				return "", fmt.Errorf("demo: clear leftover state of %s: %w", id, err)
			}
			dirs, err := r.state.Checkpoint(ctx, cfg.Storage.StateDir(id))
			if err != nil {
				return "", fmt.Errorf("demo: state checkpoint %s: %w", id, err)
			}
			r.local = append(r.local, id)
			ops.Lineage = r.lineage.through(id)
			opsBytes, _ := json.Marshal(ops)
			r.coord.OnStateSnapshot(id, map[string][]byte{operatorKey: opsBytes}, dirs)
			r.coord.OnSinkPrepared(id, cfg.Sink.Stage(ctx, id, r.pending))
			r.pending = map[string]uint64{}
			return id, nil
		},
		done: func(ctx context.Context, id string) error {
			res.Checkpoints++
			res.LastID = id
			return r.afterCompleted(ctx, id, res)
		},
		tick: func() {
			r.progress(Progress{Event: "records", Offset: r.src.Offset(), Checkpoints: res.Checkpoints, LastCompleted: res.LastID})
		},
		stop: cfg.Stop, fresh: res.RestoredID == "",
	}
	err = l.run(ctx)
	return l.stopped, err
}

// afterCompleted reports progress, prunes local state directories older
// than id and runs GC every GCEvery checkpoints. Only a fenced GC is an
// error: another writer took over and this run must stop.
func (r *runner) afterCompleted(ctx context.Context, id string, res *Result) error {
	r.progress(Progress{Event: "checkpoint", Offset: r.src.Offset(), Checkpoints: res.Checkpoints, LastCompleted: id})
	if r.cfg.PruneLocal {
		keep := r.local[:0]
		for _, old := range r.local {
			if old < id {
				_ = removeStateDir(r.cfg.Storage, old)
				continue
			}
			keep = append(keep, old)
		}
		r.local = keep
	}
	if r.cfg.GC != nil && res.Checkpoints%r.cfg.GCEvery == 0 {
		err := r.cfg.GC(ctx)
		if errors.Is(err, checkpoint.ErrFenced) {
			return fmt.Errorf("demo: gc: %w", err)
		}
		if err != nil {
			r.cfg.Logger.Warn("demo: gc", "err", err)
		}
	}
	return nil
}

// removeStateDir removes the local state directory of checkpoint id, with
// what the Storage keeps beside it when it can say (blobstorage's
// RemoveStateDir removes the marker of a directory restored unsynced).
func removeStateDir(st checkpoint.Storage, id string) error {
	if r, ok := st.(interface{ RemoveStateDir(string) error }); ok {
		return r.RemoveStateDir(id)
	}
	return os.RemoveAll(st.StateDir(id))
}
