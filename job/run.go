package job

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/state"
)

// errHalted ends a run whose crash hook returned checkpoint.HookHalt:
// nothing after the crash point was done (tests only; export_test.go).
var errHalted = errors.New("job: halted by the crash hook")

// txnIDPrefix starts the CheckpointData.TxnID of the runtime's records:
// txnIDPrefix + writer. Recovery reads the writer back from it to commit
// the prepared checkpoint's transaction, whichever node opened it.
const txnIDPrefix = "tidemark-job@"

// writerOf returns the writer a record's TxnID names.
func writerOf(cp *checkpoint.CheckpointData) (string, error) {
	w, ok := strings.CutPrefix(cp.TxnID, txnIDPrefix)
	if !ok || w == "" {
		return "", fmt.Errorf("job: checkpoint %s: txn id %q was not written by package job", cp.ID, cp.TxnID)
	}
	return w, nil
}

// operatorState is the runtime's own entry in CheckpointData.Operators.
type operatorState struct {
	// RemoteState is the Config.RemoteState that wrote the checkpoint.
	RemoteState string `json:"remote_state,omitempty"`
}

// runner is the state of one run.
type runner struct {
	cfg Config
	job *Job
	res Result

	writer string
	epoch  uint64
	st     *state.Store
	coord  *checkpoint.Coordinator
	ops    []byte   // operatorState of this run, as JSON
	local  []string // ids whose local state directory may be pruned
	next   string   // id of the open transaction: the next checkpoint

	completed chan string
	halted    chan struct{}
	haltOnce  sync.Once

	stopHydrate func()
}

func (r *runner) halt() { r.haltOnce.Do(func() { close(r.halted) }) }

func (r *runner) observe(kind EventKind, id string) {
	if r.cfg.Observe != nil {
		r.cfg.Observe(Event{Kind: kind, Checkpoint: id, Records: r.res.Records})
	}
}

func (r *runner) close() error {
	if r.coord != nil {
		r.coord.Stop()
	}
	if r.stopHydrate != nil {
		r.stopHydrate()
	}
	if r.st != nil {
		return r.st.Close()
	}
	return nil
}

func (r *runner) run(ctx context.Context) (Result, error) {
	err := r.start(ctx)
	if err == nil {
		r.observe(EventStart, r.res.Restored)
		err = r.loop(ctx)
	}
	if cerr := r.close(); cerr != nil && err == nil {
		err = fmt.Errorf("job: close state: %w", cerr)
	}
	if errors.Is(err, checkpoint.ErrFenced) {
		err = fmt.Errorf("job: fenced: another writer took over; this one stops, touching nothing: %w", err)
	}
	r.observe(EventStop, r.res.Last)
	return r.res, err
}

// start recovers and opens everything the loop needs.
func (r *runner) start(ctx context.Context) error {
	cfg := r.cfg
	_, remote, _ := remoteLevels(cfg.RemoteState)
	// Refuse, reading only, a checkpoint this run cannot open: before the
	// writer role, so that a refused run fences nobody.
	if err := r.checkStateMode(ctx, remote); err != nil {
		return err
	}

	// 1. The writer role: from here on a previous writer can no longer
	// move the pointers, so what Recover reads is what stays.
	if a, ok := cfg.Storage.(checkpoint.WriterRole); ok {
		epoch, err := a.Acquire(ctx)
		if err != nil {
			return fmt.Errorf("job: acquire writer: %w", err)
		}
		r.epoch, r.writer = epoch, fmt.Sprintf("e%d", epoch)
	} else {
		var b [6]byte
		_, _ = rand.Read(b[:]) // never fails
		r.writer = "r" + hex.EncodeToString(b[:])
	}
	r.res.Writer = r.writer

	// 2. Roll forward: a prepared record is the commit decision, so its
	// transaction is committed (again: Commit is idempotent) and the
	// checkpoint promoted and restored.
	dec, err := checkpoint.Recover(ctx, cfg.Storage, func(ctx context.Context, cp *checkpoint.CheckpointData) (bool, error) {
		w, err := writerOf(cp)
		if err != nil {
			return false, err
		}
		if err := cfg.Sink.Commit(ctx, Txn{ID: cp.ID, Writer: w}); err != nil {
			return false, fmt.Errorf("job: roll forward %s: sink commit: %w", cp.ID, err)
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("job: recover: %w", err)
	}
	r.res.Action = dec.Action
	last := ""
	if dec.Latest != nil {
		last = dec.Latest.ID
	}
	restored := ""
	if dec.Checkpoint != nil {
		restored = dec.Checkpoint.ID
	}
	r.res.Restored = restored

	// 3. Leftovers of dead writers, and ids the sink saw: never reuse one.
	if s, ok := cfg.Sink.(Sweeper); ok {
		seen, err := s.Sweep(ctx, r.writer)
		if err != nil {
			return fmt.Errorf("job: sink sweep: %w", err)
		}
		if seen != "" && checkpoint.ValidateID(seen) != nil {
			return fmt.Errorf("job: sink sweep: %q is not a checkpoint id", seen)
		}
		last = max(last, seen)
	}
	if r.next, err = checkpoint.NextID(last); err != nil {
		return fmt.Errorf("job: %w", err)
	}

	// 4. The state, always from the checkpoint: whatever the live
	// directory holds was written after it and must not be seen again.
	if err := r.openState(ctx, dec.Checkpoint, remote); err != nil {
		return err
	}
	for _, o := range cfg.Owners {
		if _, err := r.st.Owner(o); err != nil {
			return fmt.Errorf("job: open owner %q: %w", o, err)
		}
	}
	r.ops, _ = json.Marshal(operatorState{RemoteState: cfg.RemoteState})

	// 5. The source, at the checkpoint's offsets (nil: the beginning).
	var offsets []byte
	if dec.Checkpoint != nil {
		offsets = dec.Checkpoint.Offsets()
	}
	if err := cfg.Source.Seek(ctx, offsets); err != nil {
		return fmt.Errorf("job: source seek: %w", err)
	}

	// 6. The Coordinator. It never aborts: a failed persist of a prepared
	// record may have landed (the response was lost), and that record
	// commits its transaction on recovery. The loop aborts what never
	// reached the persist step itself.
	r.completed = make(chan string, 16)
	r.halted = make(chan struct{})
	c := checkpoint.NewCoordinator(cfg.Storage, txnIDPrefix+r.writer)
	c.CommitSink = func(ctx context.Context, id string) error {
		return cfg.Sink.Commit(ctx, Txn{ID: id, Writer: r.writer})
	}
	c.Logger = cfg.Logger
	c.OnCompleted = func(id string) {
		select {
		case r.completed <- id:
		default: // one checkpoint in flight: never full
		}
	}
	c.Hook = func(step checkpoint.Step, id string) checkpoint.HookAction {
		select {
		case <-r.halted:
			return checkpoint.HookHalt
		default:
		}
		if cfg.hook == nil {
			return checkpoint.HookContinue
		}
		a := cfg.hook(step, id)
		if a == checkpoint.HookHalt {
			r.halt()
		}
		return a
	}
	c.Start(ctx)
	r.coord = c
	return nil
}

// openState clears Dir's live state and opens the state of cp (nil: an
// empty state), in remote mode if remote.
func (r *runner) openState(ctx context.Context, cp *checkpoint.CheckpointData, remote bool) error {
	cfg := r.cfg
	live, err := clearLive(cfg.Dir)
	if err != nil {
		return err
	}
	opts := cfg.State
	if remote {
		levels, _, _ := remoteLevels(cfg.RemoteState)
		opts.Remote = state.RemoteOptions{
			Store:      cfg.Storage.(*blobstorage.Storage).Blobstore(),
			Prefix:     blobstorage.RemotePrefix,
			Generation: blobstorage.RemoteGeneration(r.epoch),
			Levels:     levels,
		}
	}
	restored := ""
	if cp != nil {
		restored = cp.ID
	}
	if err := r.pruneLocal(restored); err != nil {
		return err
	}
	if cp != nil {
		r.local = append(r.local, cp.ID)
		if err := checkpoint.Materialize(ctx, cfg.Storage, cp); err != nil {
			return fmt.Errorf("job: materialize %s: %w", cp.ID, err)
		}
		if r.st, err = state.OpenCheckpoint(ctx, cfg.Storage.StateDir(cp.ID), live, opts); err != nil {
			return fmt.Errorf("job: open state of %s: %w", cp.ID, err)
		}
	} else if r.st, err = state.Open(live, opts); err != nil {
		return fmt.Errorf("job: open state: %w", err)
	}
	if remote {
		r.useRemote(ctx)
	}
	return nil
}

// useRemote hands the open state to the Storage (checkpoints reference
// its objects, GC keeps them) and hydrates its cache in the background.
func (r *runner) useRemote(ctx context.Context) {
	r.cfg.Storage.(*blobstorage.Storage).UseRemote(r.st.CheckpointRemote())
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := r.st.Hydrate(ctx); err != nil && ctx.Err() == nil {
			r.cfg.Logger.Warn("job: hydrate remote state", "err", err)
		}
	}()
	r.stopHydrate = func() { cancel(); <-done }
}

// checkStateMode refuses, reading only, to resume in local mode a
// checkpoint whose state is in remote mode: its SSTs are in the store.
func (r *runner) checkStateMode(ctx context.Context, remote bool) error {
	if remote {
		return nil // local state resumed in remote mode migrates
	}
	st := r.cfg.Storage
	for _, load := range []func(context.Context) (*checkpoint.CheckpointData, error){st.LoadLatestCompleted, st.Load} {
		cp, err := load(ctx)
		if err != nil {
			return fmt.Errorf("job: %w", err)
		}
		if cp == nil {
			continue
		}
		var ops operatorState
		if raw, ok := cp.Operators[operatorKey]; ok {
			if err := json.Unmarshal(raw, &ops); err != nil {
				return fmt.Errorf("job: checkpoint %s: runtime state: %w", cp.ID, err)
			}
		}
		if ops.RemoteState != "" {
			return fmt.Errorf("%w: checkpoint %s holds state in remote mode (%q): set RemoteState to open it",
				ErrConfig, cp.ID, ops.RemoteState)
		}
	}
	return nil
}

// removeStateDir removes the local state directory of checkpoint id.
func (r *runner) removeStateDir(id string) error {
	if s, ok := r.cfg.Storage.(checkpoint.StateDirRemover); ok {
		return s.RemoveStateDir(id)
	}
	return os.RemoveAll(r.cfg.Storage.StateDir(id))
}

// pruneLocal removes, for a Storage whose local state directories are
// working copies, every one but keep's: older ones a crash kept from
// pruning, and newer ones of checkpoints never persisted.
func (r *runner) pruneLocal(keep string) error {
	if p, ok := r.cfg.Storage.(checkpoint.StateDirRemover); ok {
		if err := p.PruneLocal(keep); err != nil {
			return fmt.Errorf("job: prune local state: %w", err)
		}
	}
	return nil
}

// clearLive removes Dir's live state and the half-built copies a crash
// inside state.OpenCheckpoint left, and returns the live state's path.
func clearLive(dir string) (string, error) {
	live := filepath.Join(dir, liveDir)
	if err := os.RemoveAll(live); err != nil {
		return "", fmt.Errorf("job: clear live state: %w", err)
	}
	if stale, err := filepath.Glob(filepath.Join(dir, "."+liveDir+".restore-*")); err == nil {
		for _, s := range stale {
			_ = os.RemoveAll(s)
		}
	}
	return live, nil
}
