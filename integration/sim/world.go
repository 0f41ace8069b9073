package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing/synctest"
	"time"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/internal/localfs"
	"github.com/tidemark-io/tidemark/internal/simbug"
	"github.com/tidemark-io/tidemark/internal/simhook"
)

// Config is one simulated run.
type Config struct {
	Seed  uint64
	Rates Rates
	// Records is how many input records the job processes.
	Records int
	// MaxSteps bounds the faulted phase (store calls); the final,
	// faultless phase then finishes the job.
	MaxSteps int
	// MaxWriters bounds how many writer processes the run starts.
	MaxWriters int
	// Operator runs the concurrent operator (gc, savepoints, verify).
	Operator bool
	// Dir is where processes keep their local state directories.
	Dir string
	// KeepTrace keeps the whole trace (for the determinism check).
	KeepTrace bool
	// Runtime makes every writer run job.Run (the runtime, Pebble state,
	// the BlobSink) instead of the Coordinator driven by hand.
	Runtime bool
	// RemoteState is the runtime mode's job.Config.RemoteState ("all",
	// "lower"): the state in remote mode, its SSTs in the store.
	RemoteState string
	// Workers runs the job spanning hosts instead: a coordinator
	// (job.RunCoordinator) and a worker per slot (job.RunWorker),
	// reaching each other through the simulation's Group.
	Workers bool
	// Slots is how many workers the job has in the workers mode (0: two
	// or three, by the seed).
	Slots int
}

// Result is what a run did and found.
type Result struct {
	Runtime    bool // the writers ran job.Run
	Workers    bool // the job ran as a coordinator and workers
	Remote     bool // the writers ran job.Run with remote-mode state
	Violations []string
	Trace      []string // the last lines
	Full       []string // every line, with KeepTrace
	Hash       uint64
	Lines      int
	Stats      Stats
	Writers    int
	History    *History
	Committed  int // records whose output committed
}

// The job's parameters, in fake time.
const (
	keep   = 2
	grace  = 2 * time.Minute
	pinTTL = 2 * time.Minute
	jobPfx = "job"
	sinkPx = "sink"
)

// World is the simulated system: one store, the job's writers (each a
// process with its own disk), the sink, and an operator.
type World struct {
	cfg   Config
	sched *Scheduler
	store *Store
	job   blobstore.Blobstore // the job's prefix
	sink  *Sink
	// sinkBS is the sink's part of the store.
	sinkBS blobstore.Blobstore
	// region is a second store a savepoint is restored into.
	region *Store
	// replicas is a third store, replica the job's replica in it (under
	// replicaPfx): a replicator copies the job's checkpoints there.
	replicas *Store
	replica  blobstore.Blobstore

	mu         sync.Mutex
	violations []string
	procs      map[string]*proc
	current    string // the writer the world last started
	started    int
	finished   bool // a writer processed every record
	opDone     bool
	repDone    bool // the replicator saw the job finished, or gave up
	stopping   bool // the faulted phase is over: nothing restarts
	wg         sync.WaitGroup
	checks     *checker
	history    *History
	restartReq chan string
	rng        *rand.Rand // the supervisor's
	hosts      []*Disk    // the writers' disks (not in runtime mode)
	diskRng    *rand.Rand // which host, which crash
	lastHost   *Disk      // the host the last writer started on

	// The workers mode's.
	group        *Group
	slots        []string
	workerStarts int
	slotProc     map[string]string // slot → its current worker process
	holder       map[string]string // current worker process → its slot
	slotDir      map[string]string // slot → the dir its last worker ran in
	dirFree      map[string]bool   // dir → no process runs in it
}

// proc is a simulated process.
type proc struct {
	name   string
	cancel context.CancelFunc
	dir    string
	writer bool
	host   *Disk   // the writer's host, nil where the process has the OS's disk
	fs     stateFS // its local file system
}

// stateFS is what a writer writes its state directories with: the
// localfs.FS blobstorage restores through, and what the world's own
// state directories need besides.
type stateFS interface {
	localfs.FS
	Link(oldname, newname string) error
	WriteFile(name string, b []byte, perm fs.FileMode) error
}

// osFS is the OS's file system as a stateFS.
type osFS struct{ localfs.OS }

func (osFS) Link(oldname, newname string) error { return os.Link(oldname, newname) }
func (osFS) WriteFile(name string, b []byte, perm fs.FileMode) error {
	return os.WriteFile(name, b, perm)
}

// Violation records a broken invariant.
func (w *World) Violation(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	w.mu.Lock()
	w.violations = append(w.violations, msg)
	w.mu.Unlock()
	w.sched.Note("check", "VIOLATION: %s", msg)
}

// Run runs one simulation; call it inside a synctest bubble.
func Run(cfg Config) Result {
	if cfg.Records == 0 {
		cfg.Records = 60
	}
	if cfg.MaxSteps == 0 {
		cfg.MaxSteps = 3000
	}
	if cfg.MaxWriters == 0 {
		cfg.MaxWriters = 20
	}
	if cfg.Workers {
		defer simhook.SetNoCompactions(true)()
	}
	sched := NewScheduler(cfg.Seed, cfg.Rates)
	sched.Keep = cfg.KeepTrace
	store := NewStore(sched)
	// The store's clock runs up to 30 s behind the hosts' (its own
	// stream of the seed, so the rest of the run draws as before).
	store.Behind = time.Duration(rand.New(rand.NewPCG(cfg.Seed, 9)).IntN(31)) * time.Second
	job, _ := blobstore.WithPrefix(store, jobPfx)
	sinkBS, _ := blobstore.WithPrefix(store, sinkPx)
	w := &World{
		cfg: cfg, sched: sched, store: store, job: job, region: NewStore(sched),
		procs: map[string]*proc{}, restartReq: make(chan string, 64), rng: rand.New(rand.NewPCG(cfg.Seed, 4)),
		diskRng: rand.New(rand.NewPCG(cfg.Seed, 5)),
		history: NewHistory(jobPfx+"/_latest", jobPfx+"/_latest-completed", jobPfx+"/_writer"),
	}
	w.group = newGroup(w)
	w.slotProc, w.holder, w.slotDir, w.dirFree = map[string]string{}, map[string]string{}, map[string]string{}, map[string]bool{}
	if cfg.Workers {
		k := cfg.Slots
		if k == 0 {
			k = 2 + rand.New(rand.NewPCG(cfg.Seed, 6)).IntN(2)
		}
		for i := range k {
			w.slots = append(w.slots, fmt.Sprintf("s%d", i))
		}
	}
	w.replicas = NewStore(sched)
	w.replica, _ = blobstore.WithPrefix(w.replicas, replicaPfx)
	w.sink, w.sinkBS = &Sink{bs: sinkBS, world: w}, sinkBS
	w.checks = newChecker(w)
	sched.OnEvent = func(step int, ev Event) {
		w.history.Add(step, ev)
		w.checks.event(step, ev)
	}
	sched.OnCrash = func(name string) { w.kill(name) }
	sched.OnFreeze = func(name string, d time.Duration) {
		w.mu.Lock()
		cur := w.isCurrentLocked(name)
		w.mu.Unlock()
		if cur {
			// The failure detector gives up on the frozen writer and
			// starts another; the frozen one will wake as a zombie.
			w.restartReq <- name
		}
	}
	sched.Faulty = func(name string) bool { return !strings.HasPrefix(name, "final") && name != "check" }
	sched.Freezes = func(name string) bool {
		return strings.HasPrefix(name, "w") || cfg.Workers && strings.HasPrefix(name, "c")
	}

	// Phase 1: writers, zombies and the operator, with faults.
	if cfg.Workers {
		// One at a time, each until it blocks: a worker draws its
		// incarnation id from crypto/rand, in the order they start.
		w.startCoordinator()
		synctest.Wait()
		for _, slot := range w.slots {
			w.startWorker(slot)
			synctest.Wait()
		}
	} else {
		w.startWriter()
	}
	if cfg.Operator {
		w.spawn("op1", false, func(ctx context.Context, p *proc) { w.operator(ctx, p, 1) })
		w.spawn("r1", false, func(ctx context.Context, p *proc) { w.replicator(ctx, p, 1) })
	}
	w.spawn("super", false, func(ctx context.Context, p *proc) { w.supervisor(ctx) })
	sched.Run(cfg.MaxSteps, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.finished && ((w.opDone && w.repDone) || !cfg.Operator)
	})
	// Stop everything that still runs: zombies, the operator. They stop
	// together, in the Go scheduler's order: the trace does not say how.
	sched.quiet(true)
	w.mu.Lock()
	w.stopping = true
	for _, p := range w.procs {
		p.cancel()
	}
	w.mu.Unlock()
	sched.drain()
	w.wg.Wait()

	// Phase 2: no faults. A fresh writer finishes the job, then GC past
	// every grace period, then the checks.
	sched.Resume()
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.final()
	}()
	sched.Run(1<<40, func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	})
	<-done

	for _, h := range w.hosts {
		ents, _ := os.ReadDir(h.Root)
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		w.sched.Note("final", "host %s keeps %v", h.Name, names)
	}
	res := Result{Runtime: cfg.Runtime, Workers: cfg.Workers, Remote: cfg.RemoteState != "", Violations: w.violations, Stats: sched.Stats(), Writers: w.started, History: w.history}
	for _, h := range w.hosts {
		if res.Stats.Faults == nil {
			res.Stats.Faults = map[string]int{}
		}
		res.Stats.Faults["disk-enospc"] += h.ENOSPC
		res.Stats.Faults["machine-crash"] += h.Crashes
	}
	res.Trace = sched.Trace()
	res.Full = sched.Full
	res.Hash, res.Lines = sched.Fingerprint()
	res.Committed = w.checks.committedRecords
	return res
}

// spawn starts process name running f.
func (w *World) spawn(name string, writer bool, f func(ctx context.Context, p *proc)) *proc {
	ctx, cancel := context.WithCancel(WithProc(context.Background(), name))
	p := &proc{name: name, cancel: cancel, writer: writer, dir: filepath.Join(w.cfg.Dir, name), fs: osFS{}}
	if writer {
		w.boot(p, false)
	}
	w.mu.Lock()
	w.procs[name] = p
	w.mu.Unlock()
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer cancel()
		f(ctx, p)
		if p.host != nil {
			p.host.Exit(name)
		}
	}()
	return p
}

// boot puts writer p on a host: outside the runtime mode, mostly one a
// dead process left (its disk as that process's crash left it), else a
// new one, small or flaky now and then. A faultless one (final) gets a
// disk that never fills.
func (w *World) boot(p *proc, faultless bool) {
	if w.cfg.Runtime {
		return
	}
	w.mu.Lock()
	var free []*Disk
	for _, h := range w.hosts {
		if h.Free() && (!faultless || (h.Capacity == 0 && h.Flaky == 0)) {
			free = append(free, h)
		}
	}
	var h *Disk
	// The host of the writer this one replaces, if free, as a pod with a
	// local volume comes back to its node: the new process starts over
	// what its predecessor left, after a machine crash too.
	prev := w.lastHost
	switch {
	case prev != nil && slices.Contains(free, prev) && w.diskRng.IntN(3) > 0:
		h = prev
	case len(free) > 0 && w.diskRng.IntN(3) > 0:
		h = free[w.diskRng.IntN(len(free))]
	default:
		name := fmt.Sprintf("h%d", len(w.hosts)+1)
		h = NewDisk(name, filepath.Join(w.cfg.Dir, name), w.diskRng.Uint64())
		if !faultless {
			switch w.diskRng.IntN(4) {
			case 0:
				h.Capacity = int64(250 + w.diskRng.IntN(750))
			case 1:
				h.Flaky = 0.03
			}
		}
		w.hosts = append(w.hosts, h)
	}
	w.lastHost = h
	w.mu.Unlock()
	fsys, what := h.Boot(p.name)
	p.host, p.fs, p.dir = h, fsys.(stateFS), h.Root
	w.sched.Note(p.name, "runs on host %s (capacity %d, flaky %v): %s", h.Name, h.Capacity, h.Flaky, what)
}

// kill is a crash: the process stops at once, its disk is gone.
func (w *World) kill(name string) {
	w.mu.Lock()
	p := w.procs[name]
	cur := w.isCurrentLocked(name)
	w.mu.Unlock()
	if p != nil {
		// The disk first: once cancelled, the process's goroutines may
		// run on, and must not write.
		if p.host != nil {
			w.mu.Lock()
			machine := w.diskRng.IntN(2) == 0
			w.mu.Unlock()
			p.host.Crash(machine)
			if machine {
				w.sched.Note(name, "its machine %s crashed: unsynced writes are lost", p.host.Name)
			}
		}
		p.cancel()
	}
	if cur {
		w.restartReq <- name
	}
}

// startWriter starts the next writer process (in the workers mode, the
// next coordinator: a failover).
func (w *World) startWriter() {
	if w.cfg.Workers {
		w.startCoordinator()
		return
	}
	w.mu.Lock()
	if w.started >= w.cfg.MaxWriters || w.finished {
		w.mu.Unlock()
		return
	}
	w.started++
	name := fmt.Sprintf("w%d", w.started)
	w.current = name
	seed := w.rng.Uint64()
	w.mu.Unlock()
	w.sched.Note(name, "starts")
	w.spawn(name, true, func(ctx context.Context, p *proc) {
		rng := rand.New(rand.NewPCG(seed, 1))
		err := w.writer(ctx, p, rng)
		w.sched.Note(name, "exits: %v", err)
		w.mu.Lock()
		cur := w.current == name
		w.mu.Unlock()
		if err != nil && cur && ctx.Err() == nil {
			w.restartReq <- name
		}
	})
}

// supervisor restarts the job's writer after it died or froze, after a
// failure detector's delay.
func (w *World) supervisor(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case name := <-w.restartReq:
			w.mu.Lock()
			stale := !w.isCurrentLocked(name)
			w.mu.Unlock()
			if stale {
				continue
			}
			t := time.NewTimer(3 * time.Second)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			w.restart(name)
		}
	}
}

// final runs the faultless end of a run.
func (w *World) final() {
	w.sched.Note("final", "phase 2: no faults")
	ctx := WithProc(context.Background(), "final")
	if w.cfg.Workers {
		if err := w.finalWorkers(ctx); err != nil {
			w.Violation("the faultless final job failed: %v", err)
			return
		}
		w.checks.final(ctx)
		return
	}
	rng := rand.New(rand.NewPCG(w.cfg.Seed, 2))
	p := &proc{name: "final", dir: filepath.Join(w.cfg.Dir, "final"), writer: true, fs: osFS{}}
	w.boot(p, true)
	if err := w.writer(ctx, p, rng); err != nil {
		w.Violation("the faultless final writer failed: %v", err)
		return
	}
	w.checks.final(ctx)
}

// state is the job's state: the next offset and a checksum of the input.
type state struct {
	Next int   `json:"next"`
	Sum  int64 `json:"sum"`
}

func encode(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// writer is one writer process running the real protocol: Acquire,
// Recover (rolling a prepared checkpoint forward), Restore, then the
// Coordinator's two-phase commit per batch, with GC now and then.
//
// A failure the process survives (a store error) restarts the pipeline in
// the same process after a backoff, as a runtime does; a fence ends it.
func (w *World) writer(ctx context.Context, p *proc, rng *rand.Rand) error {
	var fsys localfs.FS // the OS's, unless the process runs on a simulated host
	if p.host != nil {
		fsys = p.fs
	}
	bs := w.job
	if w.cfg.RemoteState != "" {
		bs = procStore{Blobstore: w.job, proc: p.name}
	}
	st := blobstorage.New(bs, p.dir, blobstorage.Options{
		Concurrency: 3, Keep: keep, Grace: grace, PinTTL: pinTTL, WriterName: p.name, BufferedRestore: true,
		FS: fsys,
	})
	for attempt := 1; ; attempt++ {
		var err error
		if w.cfg.Runtime {
			if err = w.runJob(ctx, p, st); err == nil {
				w.mu.Lock()
				w.finished = true
				w.mu.Unlock()
			}
		} else {
			err = w.pipeline(ctx, p, st, rng)
		}
		if err == nil || ctx.Err() != nil || errors.Is(err, checkpoint.ErrFenced) || attempt >= 50 {
			return err
		}
		w.sched.Note(p.name, "pipeline failed, restarting: %v", err)
		t := time.NewTimer(time.Duration(500+rng.IntN(2000)) * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// pipeline is one run of the job's pipeline in process p.
func (w *World) pipeline(ctx context.Context, p *proc, st *blobstorage.Storage, rng *rand.Rand) error {
	epoch, err := st.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire: %w", err)
	}
	w.checks.writerEpoch(p.name, epoch)
	writer := fmt.Sprintf("e%d", epoch)
	dec, err := checkpoint.Recover(ctx, st, func(ctx context.Context, cp *checkpoint.CheckpointData) (bool, error) {
		// Roll forward: the prepared record is the commit decision.
		if err := w.sink.Commit(ctx, Txn{ID: cp.ID, Writer: cp.TxnID}); err != nil {
			if simbug.On(simbug.LostAsFailure) {
				return false, nil
			}
			return false, err
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	var cur state
	var ssts []string // the state's immutable files, in the current dir
	if dec.Checkpoint != nil {
		if err := json.Unmarshal(dec.Checkpoint.Operators["job"], &cur); err != nil {
			w.Violation("%s: checkpoint %s has a bad state: %v", p.name, dec.Checkpoint.ID, err)
			return err
		}
		if err := st.Restore(ctx, dec.Checkpoint.ID); err != nil {
			return fmt.Errorf("restore: %w", err)
		}
		got, files, err := readStateDir(st.StateDir(dec.Checkpoint.ID))
		if err != nil || got != cur {
			w.Violation("%s: restored %s: state dir says %+v (%v), record %+v", p.name, dec.Checkpoint.ID, got, err, cur)
			return fmt.Errorf("restored state does not match")
		}
		ssts = files
	}
	w.sched.Note(p.name, "epoch %d recovered: %s %v, next record %d", epoch, dec.Action, idOf(dec.Checkpoint), cur.Next)
	id, err := checkpoint.NextID(idOf(dec.Latest))
	if err != nil {
		return err
	}
	// As a job does once it has restored what it resumes from: every
	// other local state directory goes, and what crashed restores left.
	if err := st.PruneLocal(idOf(dec.Checkpoint)); err != nil {
		return err
	}
	prevID, prevDir := idOf(dec.Checkpoint), ""
	if dec.Checkpoint != nil {
		prevDir = st.StateDir(dec.Checkpoint.ID)
	}

	completed := make(chan string, 1)
	co := checkpoint.NewCoordinator(st, writer)
	co.CommitSink = func(ctx context.Context, id string) error {
		return w.sink.Commit(ctx, Txn{ID: id, Writer: writer})
	}
	if simbug.On(simbug.LostAsFailure) {
		co.AbortSink = func(ctx context.Context, id string) error {
			return w.sink.Abort(ctx, Txn{ID: id, Writer: writer})
		}
	}
	co.Hook = func(step checkpoint.Step, id string) checkpoint.HookAction {
		switch w.sched.Hook(p.name, string(step), id) {
		case Crash:
			return checkpoint.HookHalt
		case FailBefore:
			return checkpoint.HookFail
		}
		return checkpoint.HookContinue
	}
	co.OnCompleted = func(id string) { completed <- id }
	co.Start(ctx)
	defer co.Stop()

	for cur.Next < w.cfg.Records {
		n := min(1+rng.IntN(4), w.cfg.Records-cur.Next)
		next := state{Next: cur.Next + n, Sum: cur.Sum}
		for i := cur.Next; i < next.Next; i++ {
			next.Sum += int64(i * i)
		}
		files, err := writeStateDir(p.fs, st.StateDir(id), prevDir, ssts, id, cur.Next, next)
		if err != nil {
			return err
		}
		txn := Txn{ID: id, Writer: writer}
		if err := w.sink.Prepare(ctx, txn, cur.Next, next.Next); err != nil {
			return fmt.Errorf("sink prepare: %w", err)
		}
		co.OnBarrierInjected(id, encode(map[string]int{"next": next.Next}))
		co.OnStateSnapshot(id, map[string][]byte{"job": encode(next)}, map[string]string{"job": "job"})
		co.OnSinkPrepared(id, nil)
		select {
		case <-completed:
		case err := <-co.Fatal():
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
		if prevID != "" {
			_ = st.RemoveStateDir(prevID)
		}
		prevID, prevDir, ssts, cur = id, st.StateDir(id), files, next
		if id, err = checkpoint.NextID(id); err != nil {
			return err
		}
		if rng.IntN(6) == 0 {
			if _, err := st.GC(ctx, blobstorage.GCOptions{}); err != nil {
				if errors.Is(err, checkpoint.ErrFenced) {
					return err
				}
			}
		}
	}
	w.mu.Lock()
	w.finished = true
	w.mu.Unlock()
	w.sched.Note(p.name, "processed every record")
	return nil
}

func idOf(d *checkpoint.CheckpointData) string {
	if d == nil {
		return ""
	}
	return d.ID
}

// writeStateDir writes the state directory of checkpoint id: the earlier
// immutable files hard-linked from prevDir (as Pebble's checkpoints do),
// one new immutable file for the batch, and a mutable MANIFEST.
func writeStateDir(fsys stateFS, dir, prevDir string, ssts []string, id string, from int, st state) ([]string, error) {
	owner := filepath.Join(dir, "job")
	if err := fsys.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := fsys.MkdirAll(owner, 0o755); err != nil {
		return nil, err
	}
	seq, err := checkpoint.ParseID(id)
	if err != nil {
		return nil, err
	}
	var files []string
	if seq%4 == 0 {
		// A compaction: one new file replaces all the earlier ones, which
		// no later checkpoint references (GC's shared-file rules).
		from, ssts = 0, nil
	}
	for _, f := range ssts {
		if err := fsys.Link(filepath.Join(prevDir, "job", f), filepath.Join(owner, f)); err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	name := fmt.Sprintf("%06d.sst", seq)
	body := encode(map[string]int{"from": from, "to": st.Next})
	if err := fsys.WriteFile(filepath.Join(owner, name), body, 0o644); err != nil {
		return nil, err
	}
	files = append(files, name)
	if err := fsys.WriteFile(filepath.Join(owner, "MANIFEST"), encode(st), 0o644); err != nil {
		return nil, err
	}
	return files, nil
}

// readStateDir reads a state directory back: the MANIFEST's state, checked
// against the immutable files (which must cover 0..Next exactly).
func readStateDir(dir string) (state, []string, error) {
	owner := filepath.Join(dir, "job")
	var st state
	b, err := os.ReadFile(filepath.Join(owner, "MANIFEST"))
	if err != nil {
		return st, nil, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, nil, err
	}
	ents, err := os.ReadDir(owner)
	if err != nil {
		return st, nil, err
	}
	type span struct{ From, To int }
	var spans []span
	var files []string
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".sst") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(owner, e.Name()))
		if err != nil {
			return st, nil, err
		}
		var sp span
		if err := json.Unmarshal(b, &sp); err != nil {
			return st, nil, err
		}
		spans = append(spans, sp)
		files = append(files, e.Name())
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].From < spans[j].From })
	next, sum := 0, int64(0)
	for _, sp := range spans {
		if sp.From != next {
			return st, nil, fmt.Errorf("state files do not cover the input: %v", spans)
		}
		for i := sp.From; i < sp.To; i++ {
			sum += int64(i * i)
		}
		next = sp.To
	}
	if next != st.Next || sum != st.Sum {
		return st, nil, fmt.Errorf("state files cover up to %d (sum %d), MANIFEST says %+v", next, sum, st)
	}
	slices.Sort(files)
	return st, files, nil
}
