package demo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/tidemark-io/tidemark/checkpoint"
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

// Errors of Run.
var (
	// ErrCrashed is returned (wrapped) when the run stopped at an injected
	// crash (demofault.Faults.CrashAfter without Faults.Crash): nothing
	// after the crash point was done, as if the process had died. Run
	// again to resume.
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
	// Sink is the store of the job's output: job.BlobSinks under
	// OutputPrefix (Run) or SlotOutputPrefix (RunWorkers).
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

	// GCEvery runs the Storage's GC every that many checkpoints (the
	// runtime's). Default: DefaultGCEvery.
	GCEvery int
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
	// StopSavepoint, if not empty, is the label of a savepoint of the
	// final checkpoint a stop writes (checkpoint.CreateSavepointWith: an
	// existing savepoint of that label is never replaced, and the stop
	// then ends without one, with an error).
	StopSavepoint string

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
	// Action is empty (Result.Action holds what recovery decided); From
	// is the checkpoint restored ("" when starting fresh).
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
	// Savepoint is the key of the savepoint Config.StopSavepoint wrote
	// at a stop ("" if none).
	Savepoint string
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
	if !r.workers {
		if err := oneProcessShape(cp); err != nil {
			return err
		}
	}
	off, err := DecodeOffsets(cp.Offsets())
	if err != nil {
		return err
	}
	if off.Records != r.cfg.Records || off.Words != r.cfg.Words {
		return fmt.Errorf("%w: checkpoint %s is of a job with %d records and %d words, not %d and %d",
			ErrJobMismatch, cp.ID, off.Records, off.Words, r.cfg.Records, r.cfg.Words)
	}
	return r.checkStateMode(cp)
}

// runner holds what the refusals before a run (checkSameJob) need.
type runner struct {
	cfg     Config
	workers bool // the probe of RunWorkers: the checkpoints have the workers' owners
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
