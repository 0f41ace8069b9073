package job

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/state"
)

// ErrConfig is returned (wrapped) by Start and Run for a Config they
// refuse. They refuse before touching any store or directory.
var ErrConfig = errors.New("job: invalid config")

// Config describes a job. Storage, Dir, Source, Processor and Sink are
// required; every other zero field takes the default documented on it.
//
// Config describes one process that runs the whole job. A job spanning
// hosts runs the same Processor with RunCoordinator and RunWorker
// (CoordinatorConfig, WorkerConfig) instead.
type Config struct {
	// Storage keeps the checkpoints: a *blobstorage.Storage (resumable
	// on any node) or any checkpoint.Storage. A Storage with a writer
	// role (Acquire) is acquired first, which fences the previous writer.
	// Put its local directory (blobstorage.New's dir) under Dir, say
	// Dir/checkpoints: never Dir/live, nor the Dir of another job.
	Storage checkpoint.Storage
	// Dir is the local working directory, which the job owns alone while
	// it runs; the live state is Dir/live. Start takes a flock(2) on
	// Dir/.tidemark-job.lock and refuses, with ErrDirLocked and the
	// holder's pid, a Dir another job holds, in this process or another,
	// before touching anything: a paused job (a zombie) never shares its
	// files with its successor. The kernel drops the lock when the
	// process dies, kill -9 included. Whatever else Dir/live holds is
	// discarded at start: the state always comes from the checkpoint
	// restored.
	Dir string

	// Source, Processor and Sink are the job (see their contracts).
	Source    Source
	Processor Processor
	Sink      Sink

	// Interval is the time between checkpoints. Zero means 10s.
	Interval time.Duration
	// EveryRecords, if not zero, also takes a checkpoint once that many
	// records were read since the last one, whichever comes first.
	EveryRecords uint64
	// GCEvery runs the Storage's garbage collection (for a
	// *blobstorage.Storage: GC, whose retention is its Options.Keep and
	// Options.Grace) after the first completed checkpoint of a run (so
	// that a job restarting often still collects what its crashed runs
	// left) and then after every GCEvery. Zero means 5; negative never. A GC that finds this writer fenced stops
	// the job; other GC errors are logged.
	GCEvery int

	// RemoteState puts the state in remote mode (instant restore): "all"
	// creates every SST in the Storage's Blobstore, "lower" only those
	// of L5 and L6. Empty keeps the state on local disk. Remote mode
	// needs a *blobstorage.Storage.
	RemoteState string
	// State configures the Pebble state (its Remote field is set by
	// RemoteState; leave it zero).
	State state.Options
	// Owners are the state's owners opened at start, so that every
	// checkpoint holds them; the Processor may open others.
	Owners []string

	// Observe, if set, hears of the job's progress (see Event). It is
	// called from the job's goroutine and must not block.
	Observe func(Event)
	// Logger receives warnings (failed GC, advisory errors). Nil
	// discards them.
	Logger *slog.Logger

	// hook is the crash-test seam on the Coordinator (export_test.go).
	hook func(checkpoint.Step, string) checkpoint.HookAction
}

// EventKind says what an Event reports. Its values are stable strings,
// so a JSON encoding of an Event keeps its meaning across releases.
type EventKind string

// The kinds of Event, in the order a run emits them.
const (
	// EventStart: recovery is done; Checkpoint is the one restored, or "".
	EventStart EventKind = "start"
	// EventBatch: a batch was processed and written.
	EventBatch EventKind = "batch"
	// EventCheckpoint: Checkpoint completed.
	EventCheckpoint EventKind = "checkpoint"
	// EventStop: the job returns; Checkpoint is its last completed one.
	EventStop EventKind = "stop"
)

// Event is a progress event of a running job.
type Event struct {
	// Kind says what happened (see EventKind).
	Kind EventKind
	// Checkpoint is the checkpoint the event is about.
	Checkpoint string
	// Records counts the records this run read so far.
	Records uint64
}

// Result is what a run did, filled as far as it got.
type Result struct {
	// Action is what recovery decided, and Restored the checkpoint it
	// restored ("" when starting fresh).
	Action   checkpoint.Action
	Restored string
	// Writer names this run's sink transactions (Txn.Writer).
	Writer string
	// Checkpoints counts the checkpoints this run completed; Last is the
	// id of the last one.
	Checkpoints int
	Last        string
	// Records counts the records this run read.
	Records uint64
	// Savepoint is the key of the savepoint Stop wrote ("" if none).
	Savepoint string
}

const (
	defaultInterval = 10 * time.Second
	defaultGCEvery  = 5
	liveDir         = "live"
	// operatorKey is the runtime's entry in CheckpointData.Operators.
	operatorKey = "tidemark.job"
)

// remoteLevels parses Config.RemoteState; remote is false for "".
func remoteLevels(s string) (levels state.RemoteLevels, remote bool, err error) {
	switch s {
	case "":
		return 0, false, nil
	case "all":
		return state.RemoteAllLevels, true, nil
	case "lower":
		return state.RemoteLowerLevels, true, nil
	}
	return 0, false, fmt.Errorf("%w: RemoteState %q: want \"all\", \"lower\" or empty", ErrConfig, s)
}

// check refuses a Config Run cannot run, touching nothing.
func (c Config) check() error {
	var missing []string
	for name, isNil := range map[string]bool{
		"Storage": c.Storage == nil, "Source": c.Source == nil,
		"Processor": c.Processor == nil, "Sink": c.Sink == nil, "Dir": c.Dir == "",
	} {
		if isNil {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return fmt.Errorf("%w: %v required", ErrConfig, missing)
	}
	if c.Interval < 0 {
		return fmt.Errorf("%w: negative Interval %v", ErrConfig, c.Interval)
	}
	if c.State.Remote.Store != nil {
		return fmt.Errorf("%w: set RemoteState, not State.Remote", ErrConfig)
	}
	_, remote, err := remoteLevels(c.RemoteState)
	if err != nil {
		return err
	}
	if remote {
		if _, ok := c.Storage.(*blobstorage.Storage); !ok {
			return fmt.Errorf("%w: RemoteState needs a *blobstorage.Storage, not %T", ErrConfig, c.Storage)
		}
	}
	if dir := storageDir(c.Storage); dir != "" && within(dir, filepath.Join(c.Dir, liveDir)) {
		return fmt.Errorf("%w: the Storage's local directory %s is inside Dir/%s, the live state: give it Dir/checkpoints (blobstorage.New's dir, or checkpoint.NewFileStorage's)", ErrConfig, dir, liveDir)
	}
	for _, o := range c.Owners {
		if err := state.ValidateOwnerID(o); err != nil {
			return fmt.Errorf("%w: owner %q: %w", ErrConfig, o, err)
		}
	}
	return nil
}

// withDefaults fills the zero fields of c.
func (c Config) withDefaults() Config {
	if c.Interval == 0 {
		c.Interval = defaultInterval
	}
	if c.GCEvery == 0 {
		c.GCEvery = defaultGCEvery
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// storageDir is the local directory of a Storage that has one.
func storageDir(st checkpoint.Storage) string {
	switch d := st.(type) {
	case interface{ LocalDir() string }:
		return d.LocalDir()
	case interface{ Dir() string }:
		return d.Dir()
	}
	return ""
}

// within reports whether path is dir or below it.
func within(path, dir string) bool {
	p, err1 := filepath.Abs(path)
	d, err2 := filepath.Abs(dir)
	if err1 != nil || err2 != nil {
		return false
	}
	rel, err := filepath.Rel(d, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
