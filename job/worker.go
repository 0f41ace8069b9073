package job

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/state"
)

// ErrReplaced is returned (wrapped) by RunWorker when another
// incarnation took over its slot.
var ErrReplaced = errors.New("job: worker replaced: another incarnation holds its slot")

// WorkerConfig describes one worker of a job spanning hosts: the same
// Processor as a one-process job, the slot's part of the Source and a
// Sink whose commits do not collide with other slots' (for
// connector/jetstream, SinkConfig.Part; for BlobSink, a prefix per slot).
type WorkerConfig struct {
	// Group reaches the coordinator (required).
	Group Group
	// Slot is the worker's place in the job (one of the coordinator's
	// Slots). A restarted worker takes its slot over with a new
	// incarnation id; the previous one, if alive, stops (ErrReplaced).
	Slot string
	// Blobstore is the job's store: the one under the coordinator's
	// Storage, prefixed the same way (required).
	Blobstore blobstore.Blobstore
	// Dir is the worker's working directory, owned alone (a flock, as
	// Config.Dir): its live state and local checkpoint copies.
	Dir string
	// Source opens the slot's part of the input. It is called at every
	// generation (a restart of every worker from the last checkpoint),
	// then Seek once; a Source that is an io.Closer is closed when the
	// generation ends. On a rescale Seek gets every old slot's offsets
	// merged: it must take its own partitions and ignore the others
	// (connector/jetstream's Source does).
	Source func(ctx context.Context) (Source, error)
	// Processor and Sink are as in Config. The slot's state owners must
	// be its own: no two slots may write the same owner.
	Processor Processor
	Sink      Sink
	// Owners are opened at every start, so every part holds them. On a
	// rescale (Plan.Rescale) they are also the owners the worker restores
	// from the checkpoint: give each partition its own owner in a job
	// meant to change its slots.
	Owners []string
	// RemoteState puts the state in remote mode (instant restore), as
	// Config.RemoteState does: "all" creates every SST in Blobstore,
	// "lower" only those of L5 and L6; empty keeps it on local disk. A
	// generation then opens its owners where their tables are (it
	// downloads none of the tables in the store), hydrates their cache in
	// the background, and its parts reference those tables. Give every
	// worker of a job the same value: a worker in local mode is refused a
	// checkpoint in remote mode (ErrConfig).
	RemoteState string
	// State configures the Pebble state (its Remote field is set by
	// RemoteState; leave it zero).
	State state.Options
	// Options configure the blobstorage.Worker (Concurrency, Grace…).
	Options blobstorage.Options
	// Observe hears EventStart (a generation restored Checkpoint),
	// EventBatch, EventCheckpoint (the part of Checkpoint was saved and
	// reported) and EventStop.
	Observe func(Event)
	// Logger receives warnings. Nil discards them.
	Logger *slog.Logger
}

// RunWorker runs one worker of a job spanning hosts until the
// coordinator announces the job's end.
//
// It joins the Group under a new incarnation id
// (blobstorage.NewWorkerID(Slot)) and follows the coordinator's plan. At
// each generation it drops what it had, restores its owners of the plan's
// checkpoint from the store (blobstorage.Worker.Restore: nothing of Dir
// is trusted; in remote mode only their local files, the tables are read
// in place and hydrated in the background), opens the Source and seeks it to the slot's offsets; then
// it processes batches into the open transaction, Txn{ID: the plan's
// next checkpoint, Writer: "e<epoch>-g<gen>-<slot>"}. At each barrier,
// between two batches, it takes the Source's offsets, checkpoints its
// state, saves its part (blobstorage.Worker.SavePart, under the
// coordinator's epoch), prepares its transaction (Sink.Prepare) and
// reports. It never commits: the coordinator does, once every part is
// in. Nothing it wrote after the last completed checkpoint survives a
// new generation, so a worker killed anywhere is replaced by starting
// RunWorker again, on any node.
//
// It returns nil once the coordinator announced the end, an error
// wrapping ErrReplaced if another incarnation took its slot, and any
// other error (Source, Processor, Sink, store) as it happens: start it
// again. Cancelling ctx stops it as a crash would, with an error wrapping
// ctx's.
func RunWorker(ctx context.Context, cfg WorkerConfig) (Result, error) {
	if cfg.Group == nil || cfg.Blobstore == nil || cfg.Dir == "" || cfg.Source == nil || cfg.Processor == nil || cfg.Sink == nil {
		return Result{}, fmt.Errorf("%w: Group, Slot, Blobstore, Dir, Source, Processor and Sink are required", ErrConfig)
	}
	if err := blobstorage.ValidateWorkerID(cfg.Slot); err != nil || len(cfg.Slot) > 47 {
		return Result{}, fmt.Errorf("%w: slot %q: at most 47 bytes of [A-Za-z0-9._-]", ErrConfig, cfg.Slot)
	}
	for _, o := range cfg.Owners {
		if err := state.ValidateOwnerID(o); err != nil {
			return Result{}, fmt.Errorf("%w: owner %q: %w", ErrConfig, o, err)
		}
	}
	if cfg.State.Remote.Store != nil {
		return Result{}, fmt.Errorf("%w: set RemoteState, not State.Remote", ErrConfig)
	}
	if _, _, err := remoteLevels(cfg.RemoteState); err != nil {
		return Result{}, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	release, err := lockDir(cfg.Dir)
	if err != nil {
		return Result{}, err
	}
	defer release()
	id := blobstorage.NewWorkerID(cfg.Slot)
	bw, err := blobstorage.NewWorker(cfg.Blobstore, filepath.Join(cfg.Dir, "checkpoints"), id, cfg.Options)
	if err != nil {
		return Result{}, fmt.Errorf("job: %w", err)
	}
	w := &worker{cfg: cfg, id: id, bw: bw}
	w.res.Writer = id
	err = withCtxErr(ctx, w.run(ctx))
	if cerr := w.closeGen(); cerr != nil && err == nil {
		err = cerr
	}
	w.observe(EventStop, w.res.Last)
	return w.res, err
}

type worker struct {
	cfg WorkerConfig
	id  string
	bw  *blobstorage.Worker
	res Result

	plan   *Plan // the generation running, nil before the first
	named  bool  // a plan named this incarnation
	src    Source
	st     *state.Store
	open   string // the open transaction's checkpoint id
	writer string
	eof    bool
	saved  string // the last checkpoint whose part is saved locally

	stopHydrate func() // stops the background hydration (remote mode)
}

func (w *worker) observe(kind EventKind, id string) {
	if w.cfg.Observe != nil {
		w.cfg.Observe(Event{Kind: kind, Checkpoint: id, Records: w.res.Records})
	}
}

func (w *worker) run(ctx context.Context) error {
	plans, err := w.cfg.Group.Join(ctx, w.cfg.Slot, w.id)
	if err != nil {
		return fmt.Errorf("job: join group: %w", err)
	}
	for {
		// Between batches, or waiting when there is nothing to read.
		var p Plan
		var ok bool
		if w.plan != nil && !w.eof {
			select {
			case p, ok = <-plans:
			default:
				if err := w.batch(ctx); err != nil {
					return err
				}
				continue
			}
		} else {
			select {
			case p, ok = <-plans:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if !ok {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return errors.New("job: group: the plan's watch ended")
		}
		done, err := w.follow(ctx, p)
		if err != nil || done {
			return err
		}
	}
}

// follow applies plan p; done is true once the job ended.
func (w *worker) follow(ctx context.Context, p Plan) (done bool, err error) {
	if holder := p.Members[w.cfg.Slot]; holder != w.id {
		if holder != "" && w.named && (w.plan == nil || p.Epoch > w.plan.Epoch || p.Epoch == w.plan.Epoch && p.Gen > w.plan.Gen) {
			return false, fmt.Errorf("%w: slot %s is run by %s now", ErrReplaced, w.cfg.Slot, p.Members[w.cfg.Slot])
		}
		return false, nil // not started yet: wait for a plan naming it
	}
	w.named = true
	if cur := w.plan; cur == nil || p.Epoch != cur.Epoch || p.Gen != cur.Gen {
		if cur != nil && (p.Epoch < cur.Epoch || p.Epoch == cur.Epoch && p.Gen < cur.Gen) {
			return false, nil // stale
		}
		if p.Stop {
			return true, nil
		}
		return false, w.start(ctx, p)
	}
	if p.Stop {
		return true, nil
	}
	w.plan = &p
	if p.Barrier != "" && p.Barrier == w.open {
		return false, w.cut(ctx)
	}
	return false, nil
}

// closeGen closes the Source and state of the generation running.
func (w *worker) closeGen() error {
	if c, ok := w.src.(io.Closer); ok {
		_ = c.Close()
	}
	w.src = nil
	if w.stopHydrate != nil {
		w.stopHydrate()
		w.stopHydrate = nil
	}
	if w.st != nil {
		err := w.st.Close()
		w.st = nil
		if err != nil {
			return fmt.Errorf("job: close state: %w", err)
		}
	}
	return nil
}

// start restarts the worker at generation p.
func (w *worker) start(ctx context.Context, p Plan) error {
	if err := w.closeGen(); err != nil {
		return err
	}
	if w.plan != nil {
		// The open transaction was never reported: no record names it.
		if err := w.cfg.Sink.Abort(ctx, Txn{ID: w.open, Writer: w.writer}); err != nil {
			w.cfg.Logger.Warn("job: abort", "txn", w.open+"@"+w.writer, "err", err)
		}
	}
	w.plan, w.eof = &p, false
	w.open = p.Next
	w.writer = fmt.Sprintf("e%d-g%d-%s", p.Epoch, p.Gen, w.cfg.Slot)
	w.res.Restored = p.Restore
	cfg := w.cfg
	live, err := clearLive(cfg.Dir)
	if err != nil {
		return err
	}
	owners := p.Owners[cfg.Slot]
	if p.Rescale {
		// Restore's owners are spread over other slots: take the ones
		// this worker declares.
		owners = nil
		for _, os := range p.Owners {
			for _, o := range os {
				if slices.Contains(cfg.Owners, o) {
					owners = append(owners, o)
				}
			}
		}
	}
	opts := cfg.State
	levels, remote, _ := remoteLevels(cfg.RemoteState)
	if remote {
		// Objects this generation creates carry the coordinator's epoch:
		// its GC keeps them while it holds the writer role.
		opts.Remote = state.RemoteOptions{Store: cfg.Blobstore, Prefix: blobstorage.RemotePrefix,
			Generation: blobstorage.RemoteGeneration(p.Epoch), Levels: levels}
	}
	if p.Restore != "" && len(owners) > 0 {
		if err := w.bw.RemoveStateDir(p.Restore); err != nil {
			return fmt.Errorf("job: clear local copy of %s: %w", p.Restore, err)
		}
		// In remote mode this downloads the owners' local files only
		// (manifest, catalog, WAL): their tables stay in the store.
		if err := w.bw.Restore(ctx, p.Restore, owners); err != nil {
			return fmt.Errorf("job: restore %s: %w", p.Restore, err)
		}
		dir := w.bw.StateDir(p.Restore)
		if !remote && holdsRemoteState(dir) {
			_ = w.bw.RemoveStateDir(p.Restore)
			return fmt.Errorf("%w: checkpoint %s holds state in remote mode: set RemoteState to open it", ErrConfig, p.Restore)
		}
		w.st, err = state.OpenCheckpoint(ctx, dir, live, opts)
		_ = w.bw.RemoveStateDir(p.Restore)
	} else {
		w.st, err = state.Open(live, opts)
	}
	if err != nil {
		return fmt.Errorf("job: open state: %w", err)
	}
	if remote {
		w.useRemote(ctx)
	}
	for _, o := range cfg.Owners {
		if _, err := w.st.Owner(o); err != nil {
			return fmt.Errorf("job: open owner %q: %w", o, err)
		}
	}
	if w.src, err = cfg.Source(ctx); err != nil {
		return fmt.Errorf("job: open source: %w", err)
	}
	var offsets []byte
	if o := p.Offsets[cfg.Slot]; len(o) > 0 {
		offsets = o
	}
	if err := w.src.Seek(ctx, offsets); err != nil {
		return fmt.Errorf("job: source seek: %w", err)
	}
	cfg.Logger.Info("job: worker started", "slot", cfg.Slot, "epoch", p.Epoch, "gen", p.Gen, "restore", p.Restore)
	w.observe(EventStart, p.Restore)
	if p.Barrier != "" && p.Barrier == w.open {
		return w.cut(ctx)
	}
	return nil
}

// useRemote hands the open state to the blobstorage.Worker (its parts
// reference the state's objects) and hydrates its cache in the
// background, as the one-process runner does.
func (w *worker) useRemote(ctx context.Context) {
	w.bw.UseRemote(w.st.CheckpointRemote())
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	st := w.st
	go func() {
		defer close(done)
		if err := st.Hydrate(ctx); err != nil && ctx.Err() == nil {
			w.cfg.Logger.Warn("job: hydrate remote state", "err", err)
		}
	}()
	w.stopHydrate = func() { cancel(); <-done }
}

// holdsRemoteState reports whether a restored state directory holds an
// owner in remote mode: Pebble's remote object catalog is there.
func holdsRemoteState(dir string) bool {
	found, _ := filepath.Glob(filepath.Join(dir, "*", "REMOTE-OBJ-CATALOG-*"))
	return len(found) > 0
}

// batch reads, processes and writes one batch.
func (w *worker) batch(ctx context.Context) error {
	recs, err := w.src.Next(ctx)
	if errors.Is(err, io.EOF) {
		w.eof = true
	} else if err != nil {
		return fmt.Errorf("job: source: %w", err)
	}
	if len(recs) == 0 {
		return nil
	}
	w.res.Records += uint64(len(recs))
	out, err := w.cfg.Processor.Process(ctx, w.st, recs)
	if err != nil {
		return fmt.Errorf("job: process: %w", err)
	}
	if len(out) > 0 {
		txn := Txn{ID: w.open, Writer: w.writer}
		if err := w.cfg.Sink.Write(ctx, txn, out); err != nil {
			return fmt.Errorf("job: sink write %s: %w", txn, err)
		}
	}
	w.observe(EventBatch, "")
	return nil
}

// cut saves the worker's part of checkpoint w.open, prepares its
// transaction and reports.
func (w *worker) cut(ctx context.Context) error {
	id, p := w.open, w.plan
	txn := Txn{ID: id, Writer: w.writer}
	offsets, err := w.src.Offsets()
	if err != nil {
		return fmt.Errorf("job: source offsets: %w", err)
	}
	if len(offsets) > 0 && !json.Valid(offsets) {
		return fmt.Errorf("job: source offsets %.40q are not JSON (Source.Offsets)", offsets)
	}
	if err := w.bw.RemoveStateDir(id); err != nil {
		return fmt.Errorf("job: clear leftover state of %s: %w", id, err)
	}
	dirs, err := w.st.Checkpoint(ctx, w.bw.StateDir(id))
	if err != nil {
		return fmt.Errorf("job: state checkpoint %s: %w", id, err)
	}
	if _, err := w.bw.SavePart(ctx, p.Epoch, &checkpoint.CheckpointData{ID: id, StateDirs: dirs}); err != nil {
		return fmt.Errorf("job: save part %s: %w", id, err)
	}
	if err := w.cfg.Sink.Prepare(ctx, txn); err != nil {
		return fmt.Errorf("job: sink prepare %s: %w", txn, err)
	}
	if w.saved != "" {
		_ = w.bw.RemoveStateDir(w.saved)
	}
	w.saved = id
	r := Report{Epoch: p.Epoch, Gen: p.Gen, Slot: w.cfg.Slot, Worker: w.id, Checkpoint: id,
		Offsets: offsets, Owners: slices.Sorted(maps.Keys(dirs)), Writer: w.writer, EOF: w.eof}
	if err := w.cfg.Group.Report(ctx, r); err != nil {
		return fmt.Errorf("job: report %s: %w", id, err)
	}
	if w.open, err = checkpoint.NextID(id); err != nil {
		return fmt.Errorf("job: %w", err)
	}
	w.res.Checkpoints++
	w.res.Last = id
	w.observe(EventCheckpoint, id)
	return nil
}
