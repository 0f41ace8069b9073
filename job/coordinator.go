package job

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/checkpoint"
)

// CoordinatorConfig describes the coordinator of a job spanning hosts.
type CoordinatorConfig struct {
	// Group reaches the workers (required).
	Group Group
	// Storage keeps the checkpoints; the coordinator holds its writer
	// role and commits the checkpoints from the workers' parts
	// (required). Its local directory holds nothing of the state.
	Storage *blobstorage.Storage
	// Slots name the job's workers (required, each a valid worker id):
	// the job runs once every slot is held (RunWorker with that Slot).
	Slots []string
	// Sink returns the sink a slot's worker writes to (WorkerConfig.Sink,
	// or a sink that commits the same transactions): the coordinator
	// commits each slot's transaction of a checkpoint with it, at the
	// commit step and, rolling forward, at recovery (required).
	Sink func(slot string) (Sink, error)
	// Interval is the time between barriers. Zero means 10s.
	Interval time.Duration
	// Timeout bounds a barrier: the wait for every worker's report. A
	// barrier not answered in time (a worker died) starts a new
	// generation from the last checkpoint. Zero means 30s.
	Timeout time.Duration
	// GCEvery runs Storage.GC after the first completed checkpoint of a
	// run and then after every GCEvery. Zero means 5; negative never.
	// With workers in remote mode (WorkerConfig.RemoteState), it also
	// deletes the tables of this epoch that no kept checkpoint references,
	// once older than the Storage's Grace: keep Grace above Timeout.
	GCEvery int
	// Stop, once closed, stops the job with a final checkpoint: the
	// next barrier is cut at once, and once it completed every worker is
	// told the job ended, as at the end of every Source. Nil never stops.
	Stop <-chan struct{}
	// Observe hears EventStart (a generation starts from Checkpoint),
	// EventCheckpoint (Checkpoint completed) and EventStop.
	Observe func(Event)
	// Logger receives warnings. Nil discards them.
	Logger *slog.Logger
}

// workersRemote is the coordinator's view of its workers' state in
// remote mode (Storage.UseRemote), for its GC. It runs only right after a
// checkpoint completed, before the next barrier. Every table a worker's
// database uses then is in that checkpoint's parts, or was created after
// the worker's cut: younger than Grace, which exceeds Timeout plus the
// commit. So no table of this epoch is live beyond the checkpoints: every
// key under RemotePrefix counts as the writer's own.
type workersRemote struct{}

func (workersRemote) CheckpointObjects(context.Context, string) (map[string][]blobstorage.RemoteRef, error) {
	return nil, nil // the coordinator saves no state of its own
}

func (workersRemote) LiveObjects() (map[string][]blobstorage.RemoteRef, error) { return nil, nil }

func (workersRemote) Prefixes() map[string]string {
	return map[string]string{"": blobstorage.RemotePrefix + "/"}
}

// withCtxErr makes an error of a run whose ctx is done wrap ctx's error:
// what failed first may be a call that said so in its own words.
func withCtxErr(ctx context.Context, err error) error {
	if err == nil || ctx.Err() == nil || errors.Is(err, ctx.Err()) {
		return err
	}
	return fmt.Errorf("%w: %w", ctx.Err(), err)
}

// workersTxnPrefix starts the CheckpointData.TxnID of a worker-mode
// record; a one-process Run refuses such a record (writerOf).
const workersTxnPrefix = "tidemark-workers@"

// workersState is the runtime's operator entry in a worker-mode record.
type workersState struct {
	// Writers maps each slot to the Txn.Writer of its transaction of
	// this checkpoint: recovery commits each (roll forward).
	Writers map[string]string `json:"writers"`
	// Owners maps each slot to the state owners its part holds.
	Owners map[string][]string `json:"owners"`
}

// RunCoordinator runs the coordinator of a job spanning hosts until every
// worker's Source ended and the last checkpoint completed, or until Stop
// closed and a final checkpoint completed.
//
// It takes the writer role on Storage (fencing the previous
// coordinator), leads the Group at that epoch, and recovers rolling
// forward: the transactions of every slot named by a prepared record are
// committed again (Sink.Commit is idempotent) and the checkpoint
// restored. Then it waits until every slot is held and announces a
// generation: every worker restores its owners of the checkpoint and
// seeks its Source. Every Interval it announces a barrier; once every
// slot's report is in it assigns each owner to its worker
// (Storage.Assign), persists the record as prepared from the parts,
// commits each slot's transaction and completes the checkpoint, as Run
// does. A barrier that fails (a worker dies, is replaced, or does not
// answer within Timeout) is abandoned, nothing of it committed, and a new
// generation restarts every worker from the last completed checkpoint.
//
// The job may resume with other Slots than the checkpoint's (a rescale,
// Plan.Rescale): each worker then restores the owners it declares and
// seeks its Source with the old slots' offsets merged (JSON objects
// keyed by partition; other offsets are refused before anything). The
// first barrier fails with ErrConfig if an owner of the checkpoint, or a
// key of its offsets (a partition), is left to no slot.
//
// A coordinator fenced by a newer one (on the store or in the Group)
// returns an error wrapping checkpoint.ErrFenced. Cancelling ctx stops it
// as a crash would (the error wraps ctx's): a standby started with the
// same config takes over.
func RunCoordinator(ctx context.Context, cfg CoordinatorConfig) (Result, error) {
	if cfg.Group == nil || cfg.Storage == nil || cfg.Sink == nil || len(cfg.Slots) == 0 {
		return Result{}, fmt.Errorf("%w: Group, Storage, Slots and Sink are required", ErrConfig)
	}
	for _, s := range cfg.Slots {
		if err := blobstorage.ValidateWorkerID(s); err != nil {
			return Result{}, fmt.Errorf("%w: slot: %w", ErrConfig, err)
		}
	}
	if cfg.Interval <= 0 {
		cfg.Interval = defaultInterval
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.GCEvery == 0 {
		cfg.GCEvery = defaultGCEvery
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	sinks := map[string]Sink{}
	for _, s := range cfg.Slots {
		sk, err := cfg.Sink(s)
		if err != nil {
			return Result{}, fmt.Errorf("job: sink of slot %s: %w", s, err)
		}
		sinks[s] = sk
	}
	c := &coordinator{cfg: cfg, sinks: sinks, writers: map[string]map[string]string{}}
	err := withCtxErr(ctx, c.run(ctx))
	if errors.Is(err, checkpoint.ErrFenced) {
		err = fmt.Errorf("job: coordinator fenced: another coordinator took over: %w", err)
	}
	c.observe(EventStop, c.res.Last)
	return c.res, err
}

type coordinator struct {
	cfg   CoordinatorConfig
	sinks map[string]Sink
	res   Result
	epoch uint64

	mu      sync.Mutex
	writers map[string]map[string]string // checkpoint id -> slot -> writer

	// restored is what the next generation resumes from.
	restore string
	owners  map[string][]string
	offsets map[string]json.RawMessage
	rescale bool   // restore was taken by other slots
	lastID  string // greatest checkpoint id used
	pending pendingRestore
}

// pendingRestore is the checkpoint in flight, restored once completed.
type pendingRestore struct {
	id      string
	owners  map[string][]string
	offsets map[string]json.RawMessage
}

func (c *coordinator) observe(kind EventKind, id string) {
	if c.cfg.Observe != nil {
		c.cfg.Observe(Event{Kind: kind, Checkpoint: id})
	}
}

// commit commits every slot's transaction of checkpoint id.
func (c *coordinator) commit(ctx context.Context, id string, writers map[string]string) error {
	for _, slot := range slices.Sorted(maps.Keys(writers)) {
		sk, ok := c.sinks[slot]
		if !ok {
			return fmt.Errorf("job: checkpoint %s: slot %q is not one of Slots %v", id, slot, c.cfg.Slots)
		}
		if err := sk.Commit(ctx, Txn{ID: id, Writer: writers[slot]}); err != nil {
			return fmt.Errorf("job: commit %s of slot %s: %w", id, slot, err)
		}
	}
	return nil
}

func readWorkersState(cp *checkpoint.CheckpointData) (workersState, error) {
	var ws workersState
	raw, ok := cp.Operators[operatorKey]
	if !ok || json.Unmarshal(raw, &ws) != nil || ws.Writers == nil {
		return ws, fmt.Errorf("%w: checkpoint %s was not written by a job in worker mode (RunCoordinator)", ErrConfig, cp.ID)
	}
	return ws, nil
}

// resume returns the offsets each slot resumes cp from. With the slots
// that took cp, each gets its own; with others (a rescale), each gets
// every old slot's offsets merged, and a checkpoint whose offsets cannot
// be merged (not JSON objects keyed by partition) is refused.
func (c *coordinator) resume(cp *checkpoint.CheckpointData, ws workersState) (map[string]json.RawMessage, bool, error) {
	var bySlot map[string]json.RawMessage
	if err := json.Unmarshal(cp.Offsets(), &bySlot); err != nil {
		return nil, false, fmt.Errorf("job: checkpoint %s: offsets: %w", cp.ID, err)
	}
	old := slices.Sorted(maps.Keys(ws.Writers))
	if slices.Equal(old, slices.Sorted(slices.Values(c.cfg.Slots))) {
		return bySlot, false, nil
	}
	merged, err := mergeOffsets(bySlot)
	if err != nil {
		return nil, false, fmt.Errorf("%w: checkpoint %s was taken by slots %v, not %v, and its offsets cannot be handed to other slots: %w",
			ErrConfig, cp.ID, old, c.cfg.Slots, err)
	}
	out := map[string]json.RawMessage{}
	for _, s := range c.cfg.Slots {
		out[s] = merged
	}
	return out, true, nil
}

func (c *coordinator) run(ctx context.Context) error {
	cfg := c.cfg
	// Refuse, reading only, a checkpoint these slots cannot resume:
	// before the writer role, so that a refused run fences nobody.
	for _, load := range []func(context.Context) (*checkpoint.CheckpointData, error){cfg.Storage.LoadLatestCompleted, cfg.Storage.Load} {
		cp, err := load(ctx)
		if err != nil {
			return fmt.Errorf("job: %w", err)
		}
		if cp == nil {
			continue
		}
		ws, err := readWorkersState(cp)
		if err != nil {
			return err
		}
		if _, _, err := c.resume(cp, ws); err != nil {
			return err
		}
	}
	epoch, err := cfg.Storage.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("job: acquire writer: %w", err)
	}
	c.epoch = epoch
	// The workers' tables in remote mode are this writer's to collect.
	cfg.Storage.UseRemote(workersRemote{})
	c.res.Writer = fmt.Sprintf("e%d", epoch)
	if err := cfg.Group.Lead(ctx, epoch); err != nil {
		return fmt.Errorf("job: lead group: %w", err)
	}
	dec, err := checkpoint.Recover(ctx, cfg.Storage, func(ctx context.Context, cp *checkpoint.CheckpointData) (bool, error) {
		ws, err := readWorkersState(cp)
		if err != nil {
			return false, err
		}
		if err := c.commit(ctx, cp.ID, ws.Writers); err != nil {
			return false, fmt.Errorf("job: roll forward: %w", err)
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("job: recover: %w", err)
	}
	c.res.Action = dec.Action
	if dec.Latest != nil {
		c.lastID = dec.Latest.ID
	}
	if cp := dec.Checkpoint; cp != nil {
		ws, err := readWorkersState(cp)
		if err != nil {
			return err
		}
		// Every slot of the checkpoint must run again, or its owners'
		// state and its Source's offsets would be dropped.
		if c.offsets, c.rescale, err = c.resume(cp, ws); err != nil {
			return err
		}
		c.restore, c.owners = cp.ID, ws.Owners
		c.res.Restored = cp.ID
	}

	completed := make(chan string, 16)
	cc := checkpoint.NewCoordinator(cfg.Storage, workersTxnPrefix+c.res.Writer)
	cc.Logger = cfg.Logger
	cc.CommitSink = func(ctx context.Context, id string) error {
		c.mu.Lock()
		w := c.writers[id]
		c.mu.Unlock()
		return c.commit(ctx, id, w)
	}
	cc.OnCompleted = func(id string) {
		select {
		case completed <- id:
		default:
		}
	}
	cc.Start(ctx)
	defer cc.Stop()

	members, err := cfg.Group.Members(ctx)
	if err != nil {
		return fmt.Errorf("job: group members: %w", err)
	}
	reports, err := cfg.Group.Reports(ctx)
	if err != nil {
		return fmt.Errorf("job: group reports: %w", err)
	}
	var cur map[string]string
	full := func() bool {
		for _, s := range cfg.Slots {
			if cur[s] == "" {
				return false
			}
		}
		return true
	}
	var gen uint64
	for {
		// Every slot held: a generation starts.
		for !full() {
			select {
			case m, ok := <-members:
				if !ok {
					return fmt.Errorf("job: group members: %w", context.Cause(ctx))
				}
				cur = m
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		gen++
		plan := Plan{Epoch: c.epoch, Gen: gen, Restore: c.restore, Owners: c.owners, Offsets: c.offsets, Rescale: c.rescale, Members: map[string]string{}}
		for _, s := range cfg.Slots {
			plan.Members[s] = cur[s]
		}
		if plan.Next, err = checkpoint.NextID(c.lastID); err != nil {
			return fmt.Errorf("job: %w", err)
		}
		if err := cfg.Group.Announce(ctx, plan); err != nil {
			return fmt.Errorf("job: announce generation %d: %w", gen, err)
		}
		c.observe(EventStart, c.restore)
		cfg.Logger.Info("job: generation started", "epoch", c.epoch, "gen", gen, "restore", c.restore)
		stop, err := c.generation(ctx, cc, &plan, members, reports, completed, &cur)
		if err != nil || stop {
			return err
		}
	}
}

// generation runs barriers until one fails (false, nil: start a new
// generation) or the job ends (true, nil).
func (c *coordinator) generation(ctx context.Context, cc *checkpoint.Coordinator, plan *Plan,
	members <-chan map[string]string, reports <-chan Report, completed <-chan string, cur *map[string]string) (bool, error) {
	cfg := c.cfg
	id := plan.Next
	timer := time.NewTimer(cfg.Interval)
	defer timer.Stop()
	stop := cfg.Stop
	stopping := false
	changed := func(m map[string]string) bool {
		*cur = m
		for _, s := range cfg.Slots {
			if m[s] != plan.Members[s] {
				return true
			}
		}
		return false
	}
	for {
		select {
		case m, ok := <-members:
			if !ok {
				return false, fmt.Errorf("job: group members: %w", context.Cause(ctx))
			}
			if changed(m) {
				return false, nil
			}
			continue
		case <-reports: // a late report of an abandoned barrier
			continue
		case err := <-cc.Fatal():
			return false, err
		case <-ctx.Done():
			return false, ctx.Err()
		case <-timer.C:
		case <-stop:
			stop, stopping = nil, true // a closed channel fires once here
		}
		// The barrier.
		c.lastID = max(c.lastID, id)
		plan.Barrier = id
		if err := cfg.Group.Announce(ctx, *plan); err != nil {
			return false, fmt.Errorf("job: announce barrier %s: %w", id, err)
		}
		got := map[string]Report{}
		deadline := time.NewTimer(cfg.Timeout)
		for len(got) < len(cfg.Slots) {
			select {
			case m, ok := <-members:
				if !ok {
					deadline.Stop()
					return false, fmt.Errorf("job: group members: %w", context.Cause(ctx))
				}
				if changed(m) {
					deadline.Stop()
					cfg.Logger.Info("job: members changed: barrier abandoned", "checkpoint", id)
					return false, nil
				}
			case r, ok := <-reports:
				if !ok {
					deadline.Stop()
					return false, fmt.Errorf("job: group reports: %w", context.Cause(ctx))
				}
				if r.Epoch == plan.Epoch && r.Gen == plan.Gen && r.Checkpoint == id && plan.Members[r.Slot] == r.Worker {
					got[r.Slot] = r
				}
			case <-deadline.C:
				cfg.Logger.Warn("job: barrier timed out: a new generation restarts every worker", "checkpoint", id, "reports", len(got))
				return false, nil
			case <-ctx.Done():
				deadline.Stop()
				return false, ctx.Err()
			}
		}
		deadline.Stop()
		eof, err := c.persist(ctx, cc, id, plan, got)
		if err != nil {
			return false, err
		}
		// Wait for the checkpoint to complete: one in flight.
		if err := c.await(ctx, cc, completed, id); err != nil {
			return false, err
		}
		if eof || stopping {
			plan.Stop, plan.Barrier = true, ""
			if err := cfg.Group.Announce(ctx, *plan); err != nil {
				return false, fmt.Errorf("job: announce stop: %w", err)
			}
			return true, nil
		}
		if id, err = checkpoint.NextID(id); err != nil {
			return false, fmt.Errorf("job: %w", err)
		}
		timer.Reset(cfg.Interval)
	}
}

// persist hands checkpoint id, whose parts are all reported, to the
// Coordinator, and reports whether every Source ended.
func (c *coordinator) persist(ctx context.Context, cc *checkpoint.Coordinator, id string, plan *Plan, got map[string]Report) (bool, error) {
	if !plan.Rescale {
		for _, slot := range slices.Sorted(maps.Keys(got)) {
			if p, from := moved(c.offsets, slot, got[slot].Offsets); p != "" {
				return false, fmt.Errorf("%w: checkpoint %s: slot %s reads %s, which slot %s read in checkpoint %s: a slot keeps its partitions (give the slots new names to rescale)",
					ErrConfig, id, slot, p, from, c.restore)
			}
		}
	}
	assign := blobstorage.Assignment{}
	ws := workersState{Writers: map[string]string{}, Owners: map[string][]string{}}
	offsets := map[string]json.RawMessage{}
	eof := true
	for slot, r := range got {
		for _, o := range r.Owners {
			if prev, ok := assign[o]; ok {
				return false, fmt.Errorf("job: checkpoint %s: owner %q is run by two workers (%s, %s): give each slot its own owners", id, o, prev, r.Worker)
			}
			assign[o] = r.Worker
		}
		ws.Writers[slot], ws.Owners[slot] = r.Writer, slices.Sorted(slices.Values(r.Owners))
		if len(r.Offsets) > 0 {
			offsets[slot] = r.Offsets
		}
		eof = eof && r.EOF
	}
	// Nothing of the checkpoint resumed from may be left behind: every
	// owner is run by a slot, and on a rescale every partition is read.
	for _, owners := range c.owners {
		for _, o := range owners {
			if _, ok := assign[o]; !ok {
				return false, fmt.Errorf("%w: checkpoint %s: owner %q of checkpoint %s is run by no slot: declare it in a worker's Owners",
					ErrConfig, id, o, c.restore)
			}
		}
	}
	if plan.Rescale {
		old := c.offsets[c.cfg.Slots[0]] // every slot got the same merged document
		now, err := mergeOffsets(offsets)
		if err != nil {
			return false, fmt.Errorf("%w: checkpoint %s: %w", ErrConfig, id, err)
		}
		if p := uncovered(old, now); p != "" {
			return false, fmt.Errorf("%w: checkpoint %s: offsets %s of checkpoint %s are read by no slot: that input would be skipped",
				ErrConfig, id, p, c.restore)
		}
	}
	if err := c.cfg.Storage.Assign(assign); err != nil {
		return false, fmt.Errorf("job: assign owners: %w", err)
	}
	c.mu.Lock()
	c.writers[id] = ws.Writers
	c.mu.Unlock()
	offJSON, _ := json.Marshal(offsets)
	opsJSON, _ := json.Marshal(ws)
	cc.OnBarrierInjected(id, offJSON)
	cc.OnStateSnapshot(id, map[string][]byte{operatorKey: opsJSON}, map[string]string{})
	cc.OnSinkPrepared(id, nil)
	// The next generation resumes from here once it completed.
	c.pending = pendingRestore{id: id, owners: ws.Owners, offsets: offsets}
	return eof, nil
}

// await waits for checkpoint id to complete, then runs GC as due.
func (c *coordinator) await(ctx context.Context, cc *checkpoint.Coordinator, completed <-chan string, id string) error {
	for {
		select {
		case got := <-completed:
			if got < id {
				continue
			}
			c.mu.Lock()
			delete(c.writers, id)
			c.mu.Unlock()
			c.restore, c.owners, c.offsets = c.pending.id, c.pending.owners, c.pending.offsets
			c.rescale = false
			c.res.Checkpoints++
			c.res.Last = id
			c.observe(EventCheckpoint, id)
			if c.cfg.GCEvery > 0 && (c.res.Checkpoints == 1 || c.res.Checkpoints%c.cfg.GCEvery == 0) {
				if _, err := c.cfg.Storage.GC(ctx, blobstorage.GCOptions{}); errors.Is(err, checkpoint.ErrFenced) {
					return fmt.Errorf("job: gc: %w", err)
				} else if err != nil {
					c.cfg.Logger.Warn("job: gc", "err", err)
				}
			}
			return nil
		case err := <-cc.Fatal():
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
