package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/cmd/tidemark/internal/demofault"
	"github.com/tidemark-io/tidemark/savepoint"
	"github.com/tidemark-io/tidemark/state"
)

// Defaults of WorkersConfig.
const (
	DefaultWorkerTimeout   = 2 * time.Minute
	DefaultJoinTimeout     = 2 * time.Minute
	DefaultMaxReplacements = 16
)

// KilledWorkerMarkerPrefix starts the key of the marker a run writes
// before it kills a worker (the CLI's --kill-worker-after-records), so
// that the kill happens once per store.
const KilledWorkerMarkerPrefix = "demo/killed-worker-at-"

// Launcher starts worker processes for RunWorkers.
type Launcher interface {
	// Launch starts the worker of slot, which connects to addr, and
	// returns without waiting for it. A worker of slot started before
	// and still running is stopped first. Launch is called for every
	// slot at the start, and again for a slot whose worker was lost:
	// the new worker must start with an empty directory.
	Launch(ctx context.Context, slot int, addr string) error
}

// Killer is implemented by a Launcher that can kill the worker it
// started for a slot, as a crash would (fault injection).
type Killer interface {
	Kill(slot int) error
}

// WorkersConfig describes one run of the word-count job as a coordinator
// and Workers worker processes (see RunWorkers).
type WorkersConfig struct {
	// Config is the job, as for Run. Config.Storage must be a
	// *blobstorage.Storage: the coordinator holds its writer role and
	// commits the checkpoints from the workers' parts.
	Config
	// Workers is the number of worker processes (≥ 1). It may differ
	// from the previous run's: the owners are then reassigned.
	Workers int
	// Owners is the number of state owners (partitions). Default:
	// DefaultOwners. A job keeps it for its whole life.
	Owners int
	// Listener is where the workers connect (required).
	Listener net.Listener
	// Launcher starts the worker processes. Nil: the workers are started
	// by someone else (containers on other hosts) and connect on their
	// own; the coordinator waits for them.
	Launcher Launcher
	// StoreURL is the store as the workers open it (required): they save
	// their parts and restore their owners there.
	StoreURL string
	// Concurrency is the workers' parallel uploads and downloads.
	// Default: blobstorage.DefaultConcurrency.
	Concurrency int
	// WorkerTimeout bounds every request to a worker (a batch, a barrier
	// with its upload, a restore). A worker that does not answer in time
	// is lost. Default: DefaultWorkerTimeout.
	WorkerTimeout time.Duration
	// Token, if set, is the secret a worker must present to join
	// (WorkerConfig.Token, compared in constant time): without it, any
	// process that reaches Listener can join the job as a worker. It
	// keeps out who does not know it; it does not encrypt the
	// connection.
	Token string
	// JoinTimeout bounds the wait for a worker to connect, at the start
	// and after one was lost. Default: DefaultJoinTimeout.
	JoinTimeout time.Duration
	// MaxReplacements bounds how many lost workers one run replaces
	// before it gives up. Default: DefaultMaxReplacements.
	MaxReplacements int
	// OnWorker, if set, hears of the coordinator waiting for workers, of
	// workers joining, kept as standbys, being lost, refused and the
	// owners each one opens. Calls are one at a time (and never at once
	// with Progress), from the run's goroutine or, for a refusal or a
	// standby, from the one that read the worker's hello.
	OnWorker func(WorkerEvent)
}

// WorkerEvent is something that happened to a worker of RunWorkers.
type WorkerEvent struct {
	// Event is one of
	//   - "waiting": the coordinator waits (up to JoinTimeout) for the
	//     workers of the slots in Missing, at the start;
	//   - "joined": the worker of Slot joined;
	//   - "standby": a worker connected for Slot, whose live worker is
	//     Live: it waits as the slot's standby (it was told so), and takes
	//     over if Live is lost;
	//   - "lost": the worker of Slot was lost (Err says how); Standby, if
	//     not "", is the standby that takes over, else a new worker is
	//     launched or, without a Launcher, waited for (JoinTimeout);
	//   - "opened": a worker opened its owners;
	//   - "refused": a worker that connected was refused (a wrong token, a
	//     slot out of range, an invalid id, or a standby replaced by a
	//     newer one): Err says why, and the worker was told.
	Event  string
	Slot   int
	Worker string
	// Err is why a worker was lost or refused.
	Err error
	// Missing is, for "waiting" and "refused", the slots the coordinator
	// is waiting for (nil when it is not waiting: the job runs).
	Missing []int
	// Live is, for "standby", the id of the slot's live worker; Standby,
	// for "lost", the id of the standby that takes over ("" if none).
	Live, Standby string
	// Checkpoint is the checkpoint a worker opened its owners from (""
	// for an empty start); Owners the owners it opened; Downloaded those
	// of them it restored from the store rather than from its own disk.
	Checkpoint         string
	Owners, Downloaded []string
}

// WorkersResult is what RunWorkers did.
type WorkersResult struct {
	Result
	// Replaced is the number of lost workers replaced.
	Replaced int
	// Rollbacks is the number of times the workers were rolled back to
	// the latest completed checkpoint after a lost worker.
	Rollbacks int
	// Assignment is the last assignment of owners to worker ids.
	Assignment blobstorage.Assignment
}

// RunWorkers runs the word-count job of Run with its state split into
// Owners partitions (words hashed to owners) held by Workers worker
// processes (ServeWorker), and returns after the same exactly-once check.
//
// The calling process is the coordinator: it takes the writer role, reads
// the source, sends each batch to the workers owning its words (over
// wc.Listener; the store is the only state they share), stages their
// output in the sink, and at every checkpoint sends a barrier to every
// worker, which checkpoints its owners and saves them as its part
// (blobstorage.Worker.SavePart). The coordinator then persists the
// checkpoint through the checkpoint.Coordinator, its Storage assigned the
// owners' workers (blobstorage.Storage.Assign), so a record is written
// only when every part is present, and commits the sink's transaction
// as Run does.
//
// A worker that dies or hangs (its connection fails or a request times
// out) is replaced: the checkpoint in flight is abandoned, a new worker
// (a new worker id) is launched for the slot, and every worker rolls
// back to the latest completed checkpoint, the survivors from their own
// disks, the newcomer by restoring only its owners from the store; the
// job continues from that checkpoint's offsets. The owners are assigned
// to workers by slot (owner i to worker i mod Workers), so a run with
// another number of workers than the previous one rescales: each worker
// restores its owners from the last checkpoint, whoever wrote them, and
// the next checkpoint records the new assignment.
//
// At the end the coordinator restores every owner of the final
// checkpoint from the store and checks them, with the sink's committed
// output, against the counts computed from the source.
func RunWorkers(ctx context.Context, wc WorkersConfig) (WorkersResult, error) {
	wc.Config = wc.Config.withDefaults()
	if wc.Owners <= 0 {
		wc.Owners = DefaultOwners
	}
	if wc.WorkerTimeout <= 0 {
		wc.WorkerTimeout = DefaultWorkerTimeout
	}
	if wc.JoinTimeout <= 0 {
		wc.JoinTimeout = DefaultJoinTimeout
	}
	if wc.MaxReplacements <= 0 {
		wc.MaxReplacements = DefaultMaxReplacements
	}
	if wc.Concurrency <= 0 {
		wc.Concurrency = blobstorage.DefaultConcurrency
	}
	bs, ok := wc.Storage.(*blobstorage.Storage)
	if !ok || wc.Sink == nil || wc.Dir == "" || wc.Listener == nil || wc.StoreURL == "" {
		return WorkersResult{}, errors.New("demo: run workers: a *blobstorage.Storage, Sink, Dir, Listener and StoreURL are required")
	}
	if wc.Workers < 1 {
		return WorkersResult{}, fmt.Errorf("demo: run workers: %d workers: want at least 1", wc.Workers)
	}
	if wc.Workers > wc.Owners {
		// A worker holds at least one owner: the others would idle.
		return WorkersResult{}, fmt.Errorf("demo: run workers: %s for %s: want at most %d", plural(wc.Workers, "worker"), plural(wc.Owners, "owner"), wc.Owners)
	}
	if wc.RemoteState != RemoteStateOff {
		// A worker saves its part from local disk (blobstorage.Worker
		// refuses remote-mode state): nothing would own the tables.
		return WorkersResult{}, fmt.Errorf("demo: run workers: Config.RemoteState %q: remote state is not supported with workers yet", wc.RemoteState)
	}
	c := &wcoord{
		wc:      wc,
		storage: bs,
		faults:  demofault.From(ctx),
		src:     NewSource(wc.Records, wc.Words),
		owners:  ownerIDs(wc.Owners),
		live:    map[int]*remoteWorker{},
		pending: map[int]arrival{},
		arrive:  make(chan arrival),
		done:    make(chan struct{}),
		// Until the first join, every slot is awaited: a worker refused
		// before it (the listener accepts at once) is told so too.
		missing: map[int]bool{},
	}
	for s := range wc.Workers {
		c.missing[s] = true
	}
	defer c.shutdown()
	res, err := c.run(ctx)
	if errors.Is(err, checkpoint.ErrFenced) {
		err = fmt.Errorf("demo: fenced: another node took over this job; this one stops without touching it: %w", err)
	}
	return res, err
}

// wcoord is the state of one RunWorkers.
type wcoord struct {
	wc      WorkersConfig
	storage *blobstorage.Storage
	faults  demofault.Faults
	src     *Source
	owners  []string
	epoch   uint64
	base    Base
	lineage lineageRun // the lineage of this run's checkpoints

	// slotsMu guards live (its changes: the run's goroutine reads it
	// without), pending, missing and over, which the goroutines that read
	// the workers' hellos consult to answer a worker at once.
	slotsMu sync.Mutex
	live    map[int]*remoteWorker // slot → its worker
	pending map[int]arrival       // standbys: workers of slots that have one
	missing map[int]bool          // the slots join waits for (nil: not joining; every slot before the first join)
	over    bool                  // shut down: close every newcomer
	arrive  chan arrival
	done    chan struct{}
	closed  sync.Once
	// cbMu serialises the callbacks (OnWorker, Progress): a refusal is
	// reported from the goroutine that read the worker's hello.
	cbMu sync.Mutex

	lastID        string // greatest checkpoint id used
	lastCompleted string
	killArmed     bool
	killMarker    string
}

func (c *wcoord) event(e WorkerEvent) {
	c.cbMu.Lock()
	defer c.cbMu.Unlock()
	if c.wc.OnWorker != nil {
		c.wc.OnWorker(e)
	}
}

func (c *wcoord) progress(p Progress) {
	c.cbMu.Lock()
	defer c.cbMu.Unlock()
	if c.wc.Progress != nil {
		p.Records = c.wc.Records
		c.wc.Progress(p)
	}
}

// shutdown tells every live worker the job is over, closes the listener
// and every connection.
func (c *wcoord) shutdown() {
	c.closed.Do(func() {
		close(c.done)
		_ = c.wc.Listener.Close()
		c.slotsMu.Lock()
		defer c.slotsMu.Unlock()
		c.over = true
		for _, w := range c.live {
			w.close()
		}
		for _, a := range c.pending {
			_ = a.c.close()
		}
	})
}

func (c *wcoord) run(ctx context.Context) (WorkersResult, error) {
	cfg := c.wc.Config
	var res WorkersResult
	// 1. As Run: refuse before taking the writer role, then take it.
	if err := checkSinkStore(ctx, cfg); err != nil {
		return res, fmt.Errorf("demo: %w", err)
	}
	probe := &runner{cfg: cfg, workers: true}
	if err := probe.checkSameJob(ctx); err != nil {
		return res, err
	}
	if err := c.checkOwners(ctx); err != nil {
		return res, err
	}
	epoch, err := c.storage.Acquire(ctx)
	if err != nil {
		return res, fmt.Errorf("demo: acquire writer: %w", err)
	}
	c.epoch = epoch
	c.wc.Sink = cfg.Sink.withEpoch(epoch)

	if c.faults.KillWorkerAfter > 0 && c.src.Offset() < c.faults.KillWorkerAfter {
		c.killMarker = fmt.Sprintf("%s%d", KilledWorkerMarkerPrefix, c.faults.KillWorkerAfter)
		done, err := c.wc.Sink.bs.Exists(ctx, c.killMarker)
		if err != nil {
			return res, fmt.Errorf("demo: read kill marker: %w", err)
		}
		_, canKill := c.wc.Launcher.(Killer)
		c.killArmed = !done && canKill
	}

	// 2. The workers.
	go acceptWorkers(c.wc.Listener, c.arrive, c.done, 30*time.Second, c.admit)
	for slot := range c.wc.Workers {
		if err := c.launch(ctx, slot); err != nil {
			return res, err
		}
	}
	if err := c.join(ctx, nil); err != nil {
		return res, err
	}

	// 3. Sessions: each restores the latest completed checkpoint on every
	// worker and runs until the end of the source or a lost worker.
	first := true
	for {
		err := c.session(ctx, &res, first)
		first = false
		if err == nil {
			break
		}
		var lost *workerLostError
		if !errors.As(err, &lost) || ctx.Err() != nil {
			return res, err
		}
		if stopping(cfg.Stop) {
			// Draining: a final checkpoint needs every worker, and
			// waiting for a new one would outlast the stop's deadline.
			// The latest completed checkpoint stays the one to resume.
			return res, fmt.Errorf("demo: stopping: %w", err)
		}
		if res.Replaced >= c.wc.MaxReplacements {
			return res, fmt.Errorf("demo: gave up after replacing %s: %w", plural(res.Replaced, "worker"), err)
		}
		if err := c.replace(ctx, lost); err != nil {
			return res, err
		}
		res.Replaced++
		res.Rollbacks++
	}

	// 4. Done: stop the workers, then check from the store (unless
	// stopped before the end: there is nothing to check yet).
	c.stopWorkers(ctx)
	if res.Stopped {
		return res, c.savepoint(ctx, &res)
	}
	res.Check, err = c.check(ctx, &res)
	c.progress(Progress{Event: "done", Offset: c.src.Offset(), Checkpoints: res.Checkpoints, LastCompleted: res.LastID})
	if err != nil {
		return res, err
	}
	if !res.Check.OK() {
		return res, fmt.Errorf("%w: %s", ErrNotExactlyOnce, res.Check)
	}
	return res, nil
}

// savepoint writes the savepoint Config.StopSavepoint asks for of the
// final checkpoint of a stopped run, never replacing one.
func (c *wcoord) savepoint(ctx context.Context, res *WorkersResult) error {
	label := c.wc.StopSavepoint
	if label == "" {
		return nil
	}
	id, _, err := checkpoint.CreateSavepointWith(ctx, c.storage, c.storage.Blobstore(), label, savepoint.Options{})
	if err != nil {
		return fmt.Errorf("demo: stopped at checkpoint %s, but savepoint %q: %w", res.LastID, label, err)
	}
	if id != res.LastID {
		return fmt.Errorf("demo: savepoint %q archived checkpoint %s, not the final one %s: another writer took over", label, id, res.LastID)
	}
	res.Savepoint = checkpoint.SavepointKey(label)
	return nil
}

// checkOwners refuses, reading only, a store whose checkpoints hold
// other owners than this job's (a job run in one process, or with
// another number of owners).
func (c *wcoord) checkOwners(ctx context.Context) error {
	return checkPointed(ctx, c.storage, c.sameOwners)
}

// sameOwners checks that cp holds the state of exactly this job's owners.
func (c *wcoord) sameOwners(cp *checkpoint.CheckpointData) error {
	if err := workersShape(cp); err != nil {
		return err
	}
	if got := slices.Sorted(maps.Keys(cp.StateDirs)); !slices.Equal(got, c.owners) {
		return fmt.Errorf("%w: checkpoint %s holds the state of owners %v, this job with workers has %v", ErrJobMismatch, cp.ID, got, c.owners)
	}
	return nil
}

// launch asks the launcher for the worker of slot.
func (c *wcoord) launch(ctx context.Context, slot int) error {
	if c.wc.Launcher == nil {
		return nil
	}
	if err := c.wc.Launcher.Launch(ctx, slot, c.wc.Listener.Addr().String()); err != nil {
		return fmt.Errorf("demo: launch worker %d: %w", slot, err)
	}
	return nil
}

// join waits until every slot has a live worker (only the slots in need,
// when need is not nil), taking the slots' standbys first.
func (c *wcoord) join(ctx context.Context, need []int) error {
	start := need == nil
	if start {
		for s := range c.wc.Workers {
			need = append(need, s)
		}
	}
	missing := map[int]bool{}
	for _, s := range need {
		missing[s] = true
	}
	// Under slotsMu: take a's slot, or make a its standby.
	take := func(a arrival) {
		s := a.hello.Slot
		if !missing[s] {
			c.standbyLocked(a)
			return
		}
		w := &remoteWorker{slot: s, id: a.hello.Worker, c: a.c}
		c.live[s] = w
		delete(missing, s)
		c.event(WorkerEvent{Event: "joined", Slot: s, Worker: w.id})
	}
	c.slotsMu.Lock()
	for s := range missing {
		if a, ok := c.pending[s]; ok {
			delete(c.pending, s)
			take(a)
		}
	}
	c.missing = missing
	waiting := slices.Sorted(maps.Keys(missing))
	c.slotsMu.Unlock()
	defer func() {
		c.slotsMu.Lock()
		c.missing = nil
		c.slotsMu.Unlock()
	}()
	if start && len(waiting) > 0 {
		c.event(WorkerEvent{Event: "waiting", Missing: waiting})
	}
	timer := time.NewTimer(c.wc.JoinTimeout)
	defer timer.Stop()
	// missing changes only here, under slotsMu: this goroutine reads it
	// without.
	for len(missing) > 0 {
		select {
		case a := <-c.arrive:
			c.slotsMu.Lock()
			take(a)
			c.slotsMu.Unlock()
		case <-timer.C:
			return fmt.Errorf("demo: %d of %d workers did not connect to %s within %v (slots %v)",
				len(missing), c.wc.Workers, c.wc.Listener.Addr(), c.wc.JoinTimeout, slices.Sorted(maps.Keys(missing)))
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// replace drops the lost worker and waits for the new one of its slot:
// its standby, if it has one, else a worker launched anew or, without a
// Launcher, started by someone else.
func (c *wcoord) replace(ctx context.Context, lost *workerLostError) error {
	c.slotsMu.Lock()
	if w, ok := c.live[lost.slot]; ok && w.id == lost.worker {
		w.close()
		delete(c.live, lost.slot)
	}
	standby := c.pending[lost.slot].hello.Worker
	c.slotsMu.Unlock()
	c.event(WorkerEvent{Event: "lost", Slot: lost.slot, Worker: lost.worker, Err: lost.err, Standby: standby})
	if standby == "" {
		if err := c.launch(ctx, lost.slot); err != nil {
			return err
		}
	}
	return c.join(ctx, []int{lost.slot})
}

// stopWorkers tells every worker the job is done.
func (c *wcoord) stopWorkers(ctx context.Context) {
	_ = c.each(ctx, func(w *remoteWorker) error {
		_, err := w.call(ctx, 10*time.Second, &wireRequest{Op: opStop})
		return err
	})
	// The standbys too: they exit as the workers do, not as if the
	// coordinator had died.
	c.slotsMu.Lock()
	defer c.slotsMu.Unlock()
	for s, a := range c.pending {
		_ = a.c.sendNow(wireRequest{Op: opStop})
		_ = a.c.close()
		delete(c.pending, s)
	}
}

// each runs f on every live worker in parallel and returns the first
// error, a lost worker first.
func (c *wcoord) each(ctx context.Context, f func(w *remoteWorker) error) error {
	slots := slices.Sorted(maps.Keys(c.live))
	errs := make([]error, len(slots))
	var wg sync.WaitGroup
	for i, s := range slots {
		wg.Go(func() { errs[i] = f(c.live[s]) })
	}
	wg.Wait()
	var first error
	for _, err := range errs {
		var lost *workerLostError
		if errors.As(err, &lost) {
			return err
		}
		if first == nil {
			first = err
		}
	}
	return first
}

// assignment returns owner → slot: owner i to slot i mod Workers.
func (c *wcoord) assignment() map[string]int {
	a := map[string]int{}
	for i, o := range c.owners {
		a[o] = i % c.wc.Workers
	}
	return a
}

// session restores the latest completed checkpoint (as Run's recovery
// decides it) on every worker and processes the source from there to its
// end, or until a worker is lost.
func (c *wcoord) session(ctx context.Context, res *WorkersResult, first bool) error {
	cfg := c.wc.Config
	sink := c.wc.Sink
	dec, err := checkpoint.Recover(ctx, c.storage, sink.Committed)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if first {
		res.Action = dec.Action
	}
	if dec.Abandoned != nil {
		if first {
			res.Abandoned = dec.Abandoned.ID
		}
		if err := sink.Abort(ctx, dec.Abandoned.ID); err != nil {
			return fmt.Errorf("demo: abort abandoned checkpoint: %w", err)
		}
	}
	if _, err := sink.Sweep(ctx); err != nil {
		return err
	}
	sinkLast, err := sink.LastID(ctx)
	if err != nil {
		return err
	}
	if dec.Latest != nil {
		c.lastID = max(c.lastID, dec.Latest.ID)
	}
	c.lastID = max(c.lastID, sinkLast)

	var ops operatorState
	restored := ""
	c.src.Seek(0)
	c.lineage = lineageRun{}
	if cp := dec.Checkpoint; cp != nil {
		restored = cp.ID
		probe := &runner{cfg: cfg, workers: true}
		if err := probe.sameJob(cp); err != nil {
			return err
		}
		if err := c.sameOwners(cp); err != nil {
			return err
		}
		off, err := DecodeOffsets(cp.Offsets())
		if err != nil {
			return err
		}
		if err := json.Unmarshal(cp.Operators[operatorKey], &ops); err != nil {
			return fmt.Errorf("demo: checkpoint %s: operator state: %w", cp.ID, err)
		}
		if c.lineage, err = resumeLineage(cp, ops); err != nil {
			return err
		}
		c.src.Seek(off.Next)
	}
	c.lastCompleted = restored

	// The assignment of this session, recorded by its checkpoints.
	bySlot := c.assignment()
	assign := blobstorage.Assignment{}
	ownersOf := map[int][]string{}
	for o, s := range bySlot {
		assign[o] = c.live[s].id
		ownersOf[s] = append(ownersOf[s], o)
	}
	if err := c.storage.Assign(assign); err != nil {
		return fmt.Errorf("demo: assign owners: %w", err)
	}
	res.Assignment = assign

	// Every worker opens its owners from the checkpoint.
	var mu sync.Mutex
	var total uint64
	var opened []WorkerEvent
	err = c.each(ctx, func(w *remoteWorker) error {
		owners := ownersOf[w.slot]
		sort.Strings(owners)
		rep, err := w.call(ctx, c.wc.WorkerTimeout, &wireRequest{
			Op: opOpen, Store: c.wc.StoreURL, Concurrency: c.wc.Concurrency,
			MemTableSize: cfg.State.MemTableSize, CacheSize: cfg.State.CacheSize,
			Checkpoint: restored, Owners: owners,
		})
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		for _, o := range owners {
			total += rep.Totals[o]
		}
		opened = append(opened, WorkerEvent{Event: "opened", Slot: w.slot, Worker: w.id, Checkpoint: restored, Owners: owners, Downloaded: rep.Downloaded})
		return nil
	})
	if err != nil {
		return err
	}
	sort.Slice(opened, func(i, j int) bool { return opened[i].Slot < opened[j].Slot })
	for _, e := range opened {
		c.event(e)
	}
	if total != c.src.Offset() {
		return fmt.Errorf("demo: checkpoint %s: the workers' state holds %d records but the offsets say %d", restored, total, c.src.Offset())
	}
	if first {
		if c.base, err = outputBase(ctx, sink.bs, sink.CommittedThrough, dec.Checkpoint, c.src.Offset()); err != nil {
			return err
		}
		res.RestoredID = restored
		res.StartOffset = c.src.Offset()
		c.progress(Progress{Event: "start", Offset: c.src.Offset(), Action: dec.Action.String(), From: restored})
	}
	res.EndOffset = c.src.Offset()

	// The checkpoint coordinator of this session.
	completed := make(chan string, 16)
	halted := make(chan struct{})
	var haltOnce sync.Once
	halt := func() { haltOnce.Do(func() { close(halted) }) }
	cc := checkpoint.NewCoordinator(c.storage, TxnIDOf(sink.Writer()))
	cc.CommitSink = sink.Commit
	cc.AbortSink = sink.Abort
	cc.Logger = cfg.Logger
	cc.OnCompleted = func(id string) {
		select {
		case completed <- id:
		default:
		}
	}
	cc.Hook = func(step checkpoint.Step, id string) checkpoint.HookAction {
		select {
		case <-halted:
			return checkpoint.HookHalt
		default:
		}
		if c.faults.Hook == nil {
			return checkpoint.HookContinue
		}
		a := c.faults.Hook(step, id)
		if a == checkpoint.HookHalt {
			halt()
		}
		return a
	}
	cc.Start(ctx)

	s := &wsession{c: c, res: res, cc: cc, completed: completed, halted: halted, halt: halt, bySlot: bySlot}
	err = s.process(ctx, ops)
	res.EndOffset = c.src.Offset()
	// Stop finalizes a checkpoint already queued (all its parts in): a
	// lost worker does not undo it. Count it; the next session's
	// recovery restores it.
	cc.Stop()
	for {
		select {
		case id := <-completed:
			res.Checkpoints++
			res.LastID = id
			c.lastCompleted = id
			continue
		default:
		}
		break
	}
	return err
}

// wsession is one session of RunWorkers: a fixed set of workers.
type wsession struct {
	c         *wcoord
	res       *WorkersResult
	cc        *checkpoint.Coordinator
	completed chan string
	halted    chan struct{}
	halt      func()
	bySlot    map[string]int
	pending   map[string]uint64
}

func (s *wsession) afterCompleted(ctx context.Context, id string) error {
	s.res.Checkpoints++
	s.res.LastID = id
	s.c.lastCompleted = id
	c := s.c
	c.progress(Progress{Event: "checkpoint", Offset: c.src.Offset(), Checkpoints: s.res.Checkpoints, LastCompleted: id})
	if c.wc.GC != nil && s.res.Checkpoints%c.wc.GCEvery == 0 {
		err := c.wc.GC(ctx)
		if errors.Is(err, checkpoint.ErrFenced) {
			return fmt.Errorf("demo: gc: %w", err)
		}
		if err != nil {
			c.wc.Logger.Warn("demo: gc", "err", err)
		}
	}
	return nil
}

// batch sends one batch of records to the workers of their owners and
// returns the output they report.
func (s *wsession) batch(ctx context.Context, words []string) (map[string]uint64, error) {
	c := s.c
	per := map[int]map[string]map[string]uint64{}
	for _, w := range words {
		o := c.owners[partitionOf(w, len(c.owners))]
		slot := s.bySlot[o]
		if per[slot] == nil {
			per[slot] = map[string]map[string]uint64{}
		}
		if per[slot][o] == nil {
			per[slot][o] = map[string]uint64{}
		}
		per[slot][o][w]++
	}
	var mu sync.Mutex
	out := make(map[string]uint64, len(words))
	var n uint64
	err := c.each(ctx, func(w *remoteWorker) error {
		recs, ok := per[w.slot]
		if !ok {
			return nil
		}
		rep, err := w.call(ctx, c.wc.WorkerTimeout, &wireRequest{Op: opBatch, Records: recs})
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		for word, k := range rep.Deltas {
			out[word] += k
			n += k
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if n != uint64(len(words)) {
		return nil, fmt.Errorf("demo: the workers report %d records of a batch of %d", n, len(words))
	}
	return out, nil
}

// barrier checkpoints every worker's owners as checkpoint id and returns
// the state directories of all owners.
func (s *wsession) barrier(ctx context.Context, id string) (map[string]string, error) {
	c := s.c
	var mu sync.Mutex
	dirs := map[string]string{}
	err := c.each(ctx, func(w *remoteWorker) error {
		rep, err := w.call(ctx, c.wc.WorkerTimeout, &wireRequest{Op: opBarrier, ID: id, Epoch: c.epoch, Keep: c.lastCompleted})
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		maps.Copy(dirs, rep.Dirs)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if got := slices.Sorted(maps.Keys(dirs)); !slices.Equal(got, c.owners) {
		return nil, fmt.Errorf("demo: barrier %s: the workers checkpointed owners %v, want %v", id, got, c.owners)
	}
	return dirs, nil
}

// process reads the source to its end, checkpointing on the way, as
// Run's process does (the same loop), with the state on the workers.
func (s *wsession) process(ctx context.Context, ops operatorState) error {
	c := s.c
	cfg := c.wc.Config
	ops.Runs++
	s.pending = map[string]uint64{}
	l := &loop{
		src: c.src, sink: c.wc.Sink, faults: c.faults,
		batch: cfg.Batch, interval: cfg.Interval, every: cfg.EveryRecords,
		completed: s.completed, fatal: s.cc.Fatal(), halted: s.halted, halt: s.halt,
		apply: func(ctx context.Context, words []string) error {
			out, err := s.batch(ctx, words)
			if err != nil {
				return err
			}
			for w, k := range out {
				s.pending[w] += k
			}
			return nil
		},
		cut: func(ctx context.Context) (string, error) {
			id, err := checkpoint.NextID(c.lastID)
			if err != nil {
				return "", fmt.Errorf("demo: %w", err)
			}
			c.lastID = id
			s.cc.OnBarrierInjected(id, EncodeOffsets(c.src.Offsets()))
			dirs, err := s.barrier(ctx, id)
			if err != nil {
				// The checkpoint never gets its state: the Coordinator
				// never persists it, and the next session abandons it.
				return "", err
			}
			ops.Lineage = c.lineage.through(id)
			opsBytes, _ := json.Marshal(ops)
			s.cc.OnStateSnapshot(id, map[string][]byte{operatorKey: opsBytes}, dirs)
			s.cc.OnSinkPrepared(id, c.wc.Sink.Stage(ctx, id, s.pending))
			s.pending = map[string]uint64{}
			return id, nil
		},
		done: s.afterCompleted,
		afterBatch: func(ctx context.Context) error {
			if !c.killArmed || c.src.Offset() < c.faults.KillWorkerAfter {
				return nil
			}
			c.killArmed = false
			if err := c.wc.Sink.bs.Put(ctx, c.killMarker, stringsReader(time.Now().UTC().Format(time.RFC3339))); err != nil {
				return fmt.Errorf("demo: write kill marker: %w", err)
			}
			if err := c.wc.Launcher.(Killer).Kill(0); err != nil {
				return fmt.Errorf("demo: kill worker 0: %w", err)
			}
			return nil
		},
		tick: func() {
			c.progress(Progress{Event: "records", Offset: c.src.Offset(), Checkpoints: s.res.Checkpoints, LastCompleted: s.res.LastID})
		},
		stop: cfg.Stop, fresh: c.lastCompleted == "",
	}
	err := l.run(ctx)
	s.res.Stopped = l.stopped
	return err
}

// check restores every owner of the final checkpoint from the store into
// the coordinator's directory and runs the exactly-once check over them
// and the sink's committed output.
func (c *wcoord) check(ctx context.Context, res *WorkersResult) (Check, error) {
	cp, err := c.storage.LoadLatestCompleted(ctx)
	if err != nil {
		return Check{}, fmt.Errorf("demo: check: %w", err)
	}
	if cp == nil || cp.ID != c.lastCompleted {
		return Check{}, fmt.Errorf("demo: check: the latest completed checkpoint is %v, not this run's last %q", cp, c.lastCompleted)
	}
	off, err := DecodeOffsets(cp.Offsets())
	if err != nil {
		return Check{}, err
	}
	if off.Next != c.src.Records() {
		return Check{}, fmt.Errorf("demo: check: the final checkpoint %s is at record %d, not at the end %d", cp.ID, off.Next, c.src.Records())
	}
	if err := checkpoint.Materialize(ctx, c.storage, cp); err != nil {
		return Check{}, fmt.Errorf("demo: check: restore %s: %w", cp.ID, err)
	}
	work, err := os.MkdirTemp(c.wc.Dir, "check-")
	if err != nil {
		return Check{}, err
	}
	defer os.RemoveAll(work)
	defer func() { _ = c.storage.RemoveStateDir(cp.ID) }()
	got := map[string]uint64{}
	var total uint64
	for _, o := range c.owners {
		// A worker checkpoints owner o's Store (one database, o) into
		// StateDir/o, so its state directory is o/o.
		if cp.StateDirs[o] != o+"/"+o {
			return Check{}, fmt.Errorf("demo: check: checkpoint %s: owner %s in %q, want %q", cp.ID, o, cp.StateDirs[o], o+"/"+o)
		}
		st, err := state.OpenCheckpoint(ctx, filepath.Join(c.storage.StateDir(cp.ID), o), filepath.Join(work, o), c.wc.State)
		if err != nil {
			return Check{}, fmt.Errorf("demo: check: open owner %s of %s: %w", o, cp.ID, err)
		}
		p, err := openPartition(st, o)
		if err == nil {
			err = p.addAll(got)
		}
		var n uint64
		if err == nil {
			n, err = p.total()
		}
		if cerr := st.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return Check{}, err
		}
		total += n
	}
	lin := c.lineage.through(cp.ID)
	out, err := c.wc.Sink.OutputOf(ctx, lin)
	if err != nil {
		return Check{}, err
	}
	chk := checkExactlyOnce(c.src, out, got, c.base, lin)
	if total != c.src.Records() {
		chk.StateWrong++
		chk.StateDiff = append(chk.StateDiff, fmt.Sprintf("records in the state: got %d, want %d", total, c.src.Records()))
	}
	return chk, nil
}
