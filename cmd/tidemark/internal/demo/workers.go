package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/cmd/tidemark/internal/demofault"
	tmjs "github.com/tidemark-io/tidemark/connector/jetstream"
	"github.com/tidemark-io/tidemark/job"
	"github.com/tidemark-io/tidemark/savepoint"
	"github.com/tidemark-io/tidemark/state"
)

// DefaultWorkerTimeout bounds a barrier of a job with workers: a worker
// that does not report within it (it died) restarts every worker.
const DefaultWorkerTimeout = 30 * time.Second

// KilledWorkerMarkerPrefix starts the key of the marker worker 0 writes
// before it kills itself (demofault.Faults.KillWorkerAfter), once per store.
const KilledWorkerMarkerPrefix = "demo/killed-worker-at-"

// The NATS key-value buckets of a job with workers: the job's
// description (jobKey) and the job.Group.
const (
	jobBucket   = "tidemark-demo"
	jobKey      = "job"
	groupBucket = "tidemark-demo-group"
)

// SlotOutputPrefix is where slot k of a job with workers commits its
// output: a job.BlobSink per slot.
func SlotOutputPrefix(slot int) string { return fmt.Sprintf("%sslot%d/", OutputPrefix, slot) }

// slotName is the job.WorkerConfig.Slot of slot k.
func slotName(k int) string { return fmt.Sprintf("slot%d", k) }

// Launcher starts the worker processes of RunWorkers.
type Launcher interface {
	// Launch starts the worker of slot and returns without waiting for
	// it. Called once per slot at the start; the launcher replaces a
	// worker that dies with a new one on an empty directory.
	Launch(ctx context.Context, slot int) error
}

// WorkersConfig describes one run of the word-count job as a coordinator
// (this process) and Workers worker processes (ServeWorker).
type WorkersConfig struct {
	// Config is the job, as for Run. Config.Storage must be a
	// *blobstorage.Storage; RemoteState must be off.
	Config
	// Workers is the number of workers, 1 to DefaultOwners. A resumed
	// job may use another number (a rescale).
	Workers int
	// JetStream reaches the NATS server the workers connect to: the job's
	// description and its job.Group live in key-value buckets there.
	JetStream natsjs.JetStream
	// StoreURL is the store as the workers open it (required).
	StoreURL string
	// Concurrency is the workers' parallel uploads and downloads.
	Concurrency int
	// Launcher starts the workers. Nil: they are started elsewhere.
	Launcher Launcher
	// WorkerTimeout bounds a barrier. Default: DefaultWorkerTimeout.
	WorkerTimeout time.Duration
}

// jobSpec is what a worker learns of the job from the coordinator.
type jobSpec struct {
	Store           string        `json:"store"`
	Records         uint64        `json:"records"`
	Words           int           `json:"words"`
	Batch           int           `json:"batch"`
	Workers         int           `json:"workers"`
	Slow            time.Duration `json:"slow"`
	Concurrency     int           `json:"concurrency"`
	MemTableSize    uint64        `json:"memtable_size"`
	CacheSize       int64         `json:"cache_size"`
	KillWorkerAfter uint64        `json:"kill_worker_after,omitempty"`
	RemoteState     string        `json:"remote_state,omitempty"`
}

// workersStateMode refuses to resume in local mode a job whose workers
// keep their state in the store: their parts name remote tables, which
// only remote mode opens. It reads only, before the writer role is taken.
func workersStateMode(ctx context.Context, storage *blobstorage.Storage, remoteState string) error {
	if _, remote, _ := ParseRemoteState(remoteState); remote {
		return nil
	}
	for _, name := range []string{blobstorage.PointerLatestCompleted, blobstorage.PointerLatest} {
		rec, err := storage.PointerRecord(ctx, name)
		if err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		if rec != nil && len(rec.Remote) > 0 {
			return fmt.Errorf("%w (its tables are in the store): checkpoint %s cannot be opened in local mode; run again with --remote-state",
				ErrStateMode, rec.ID)
		}
	}
	return nil
}

// RunWorkers runs the word-count job on job.RunCoordinator, its workers
// on job.RunWorker, coordinated through a connector/jetstream Group. Each
// worker reads its own partitions of the source (partition p for slot
// p % Workers), keeps their owners' state and commits through its own
// job.BlobSink (SlotOutputPrefix); no record passes through this process.
// At the end it checks exactly-once, as Run does, against every slot's
// committed output and the final checkpoint's state, read back from the
// store. Config.Stop stops the job with a final checkpoint.
func RunWorkers(ctx context.Context, wc WorkersConfig) (Result, error) {
	wc.Config = wc.Config.withDefaults()
	if wc.WorkerTimeout <= 0 {
		wc.WorkerTimeout = DefaultWorkerTimeout
	}
	storage, ok := wc.Storage.(*blobstorage.Storage)
	switch {
	case !ok || wc.Sink == nil || wc.Dir == "" || wc.JetStream == nil || wc.StoreURL == "":
		return Result{}, errors.New("demo: run workers: a *blobstorage.Storage, Sink, Dir, JetStream and StoreURL are required")
	case wc.Workers < 1:
		return Result{}, fmt.Errorf("demo: run workers: %d workers: want at least 1", wc.Workers)
	case wc.Workers > DefaultOwners:
		// A worker holds at least one owner: the others would idle.
		return Result{}, fmt.Errorf("demo: run workers: %s for %s: want at most %d", plural(wc.Workers, "worker"), plural(DefaultOwners, "owner"), DefaultOwners)
	}
	if _, _, err := ParseRemoteState(wc.RemoteState); err != nil {
		return Result{}, err
	}
	if err := checkSinkStore(ctx, wc.Config); err != nil {
		return Result{}, fmt.Errorf("demo: %w", err)
	}
	if err := checkPointed(ctx, storage, (&runner{cfg: wc.Config, workers: true}).sameWorkersJob); err != nil {
		return Result{}, err
	}
	if err := workersStateMode(ctx, storage, wc.RemoteState); err != nil {
		return Result{}, err
	}
	faults := demofault.From(ctx)
	spec := jobSpec{Store: wc.StoreURL, Records: wc.Records, Words: wc.Words, Batch: wc.Batch, Workers: wc.Workers,
		Slow: faults.Slow, Concurrency: wc.Concurrency, MemTableSize: wc.State.MemTableSize, CacheSize: wc.State.CacheSize,
		KillWorkerAfter: faults.KillWorkerAfter, RemoteState: wc.RemoteState}
	if err := publishJob(ctx, wc.JetStream, spec); err != nil {
		return Result{}, err
	}
	group, err := tmjs.NewGroup(ctx, wc.JetStream, groupBucket, 1)
	if err != nil {
		return Result{}, fmt.Errorf("demo: group: %w", err)
	}
	if wc.Launcher != nil {
		for k := range wc.Workers {
			if err := wc.Launcher.Launch(ctx, k); err != nil {
				return Result{}, fmt.Errorf("demo: launch worker %d: %w", k, err)
			}
		}
	}
	c := &wcoord{wc: wc, storage: storage, faults: faults}
	return c.run(ctx, group)
}

// publishJob writes the job's description for the workers.
func publishJob(ctx context.Context, js natsjs.JetStream, spec jobSpec) error {
	kv, err := js.CreateOrUpdateKeyValue(ctx, natsjs.KeyValueConfig{Bucket: jobBucket, History: 1})
	if err != nil {
		return fmt.Errorf("demo: job bucket: %w", err)
	}
	b, _ := json.Marshal(spec) // cannot fail: plain fields
	if _, err := kv.Put(ctx, jobKey, b); err != nil {
		return fmt.Errorf("demo: publish the job: %w", err)
	}
	return nil
}

// wcoord is the state of one RunWorkers.
type wcoord struct {
	wc      WorkersConfig
	storage *blobstorage.Storage
	faults  demofault.Faults
	res     Result
	started bool
	cancel  context.CancelCauseFunc
}

func (c *wcoord) progress(p Progress) {
	if c.wc.Progress != nil {
		p.Records = c.wc.Records
		c.wc.Progress(p)
	}
}

func (c *wcoord) run(ctx context.Context, group job.Group) (Result, error) {
	ctx, c.cancel = context.WithCancelCause(ctx)
	defer c.cancel(nil)
	slots := make([]string, c.wc.Workers)
	for k := range slots {
		slots[k] = slotName(k)
	}
	jres, err := job.RunCoordinator(ctx, job.CoordinatorConfig{
		Group: group, Storage: c.storage, Slots: slots,
		Sink: func(slot string) (job.Sink, error) {
			var k int
			if _, err := fmt.Sscanf(slot, "slot%d", &k); err != nil {
				return nil, fmt.Errorf("demo: slot %q: %w", slot, err)
			}
			return job.NewBlobSink(c.wc.Sink.bs, SlotOutputPrefix(k)), nil
		},
		Interval: c.wc.Interval, Timeout: c.wc.WorkerTimeout, GCEvery: c.wc.GCEvery,
		Stop: c.wc.Stop, Logger: c.wc.Logger,
		Observe: func(e job.Event) { c.observe(ctx, e) },
	})
	res := &c.res
	res.Action, res.RestoredID = jres.Action, jres.Restored
	if cause := context.Cause(ctx); errors.Is(cause, ErrCrashed) {
		return *res, cause
	}
	if err != nil {
		if errors.Is(err, checkpoint.ErrFenced) {
			err = fmt.Errorf("demo: fenced: another node took over this job; this one stops without touching it: %w", err)
		}
		return *res, err
	}
	if stopped(c.wc.Stop) && res.EndOffset < c.wc.Records {
		res.Stopped = true
		return *res, c.savepoint(ctx)
	}
	res.Check, err = c.check(ctx)
	c.progress(Progress{Event: "done", Offset: res.EndOffset, Checkpoints: res.Checkpoints, LastCompleted: res.LastID})
	if err != nil {
		return *res, err
	}
	if !res.Check.OK() {
		return *res, fmt.Errorf("%w: %s", ErrNotExactlyOnce, res.Check)
	}
	return *res, nil
}

// stopped reports whether stop is closed.
func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

// observe turns the coordinator's events into progress, and injects the
// crash of demofault.Faults.CrashAfter at the first checkpoint past it.
func (c *wcoord) observe(ctx context.Context, e job.Event) {
	res := &c.res
	off := res.EndOffset
	if e.Checkpoint != "" {
		cp, err := c.storage.LoadSpecific(ctx, e.Checkpoint)
		if err != nil {
			c.wc.Logger.Warn("demo: read checkpoint", "id", e.Checkpoint, "err", err)
			return
		}
		o, err := workersOffsets(cp)
		if err != nil {
			c.wc.Logger.Warn("demo: read checkpoint", "id", e.Checkpoint, "err", err)
			return
		}
		off = o.read()
	}
	switch e.Kind {
	case "start":
		res.EndOffset = off
		if c.started {
			return // a new generation: every worker restarts
		}
		c.started = true
		res.StartOffset = off
		c.progress(Progress{Event: "start", Offset: off, From: e.Checkpoint})
	case "checkpoint":
		res.Checkpoints++
		res.LastID, res.EndOffset = e.Checkpoint, off
		c.progress(Progress{Event: "checkpoint", Offset: off, Checkpoints: res.Checkpoints, LastCompleted: e.Checkpoint})
		if at := c.faults.CrashAfter; at > 0 && off >= at {
			c.crash(ctx, at)
		}
	}
}

// crash is demofault.Faults.CrashAfter: once per store (a marker).
func (c *wcoord) crash(ctx context.Context, at uint64) {
	bs := c.wc.Sink.bs
	marker := fmt.Sprintf("%s%d", CrashMarkerPrefix, at)
	if done, err := bs.Exists(ctx, marker); err != nil || done {
		return
	}
	if err := bs.Put(ctx, marker, strings.NewReader(time.Now().UTC().Format(time.RFC3339))); err != nil {
		c.wc.Logger.Warn("demo: write crash marker", "err", err)
		return
	}
	if c.faults.Crash != nil {
		c.faults.Crash() // the CLI's never returns
	}
	c.cancel(fmt.Errorf("demo: at offset %d: %w", c.res.EndOffset, ErrCrashed))
}

// savepoint writes the savepoint Config.StopSavepoint names of the final
// checkpoint of a stopped run, never replacing one.
func (c *wcoord) savepoint(ctx context.Context) error {
	label := c.wc.StopSavepoint
	if label == "" {
		return nil
	}
	id, _, err := checkpoint.CreateSavepointWith(ctx, c.storage, c.storage.Blobstore(), label, savepoint.Options{})
	if err != nil {
		return fmt.Errorf("demo: stopped at checkpoint %s, but savepoint %q: %w", c.res.LastID, label, err)
	}
	if id != c.res.LastID {
		return fmt.Errorf("demo: savepoint %q archived checkpoint %s, not the final one %s: another writer took over", label, id, c.res.LastID)
	}
	c.res.Savepoint = checkpoint.SavepointKey(label)
	return nil
}

// sameWorkersJob checks that cp is a checkpoint of this job with workers:
// its shape, records, words and owners.
func (r *runner) sameWorkersJob(cp *checkpoint.CheckpointData) error {
	if err := r.checkStateMode(cp); err != nil {
		return err
	}
	if err := workersShape(cp); err != nil {
		return err
	}
	if ok, owners := ranWithWorkers(cp); !ok || !slices.Equal(owners, ownerIDs(DefaultOwners)) {
		return fmt.Errorf("%w: checkpoint %s holds the state of owners %v, this job with workers has %v", ErrJobMismatch, cp.ID, owners, ownerIDs(DefaultOwners))
	}
	o, err := workersOffsets(cp)
	if err != nil {
		return err
	}
	if o.Records != r.cfg.Records || o.Words != r.cfg.Words {
		return fmt.Errorf("%w: checkpoint %s is of a job with %d records and %d words, not %d and %d",
			ErrJobMismatch, cp.ID, o.Records, o.Words, r.cfg.Records, r.cfg.Words)
	}
	return nil
}

// check restores the final checkpoint from the store and compares its
// state, with every slot's committed output, with the source's counts.
func (c *wcoord) check(ctx context.Context) (Check, error) {
	cp, err := c.storage.LoadLatestCompleted(ctx)
	if err != nil {
		return Check{}, fmt.Errorf("demo: check: %w", err)
	}
	if cp == nil || cp.ID != c.res.LastID && c.res.LastID != "" {
		return Check{}, fmt.Errorf("demo: check: the latest completed checkpoint is %v, not this run's last %q", cp, c.res.LastID)
	}
	if err := checkpoint.Materialize(ctx, c.storage, cp); err != nil {
		return Check{}, fmt.Errorf("demo: check: restore %s: %w", cp.ID, err)
	}
	defer func() { _ = c.storage.RemoveStateDir(cp.ID) }()
	work, err := os.MkdirTemp(c.wc.Dir, "check-")
	if err != nil {
		return Check{}, err
	}
	defer os.RemoveAll(work)
	opts := c.wc.State
	if levels, remote, _ := ParseRemoteState(c.wc.RemoteState); remote {
		// The check creates nothing the workers' state could have named.
		opts.Remote = state.RemoteOptions{Store: c.storage.Blobstore(), Prefix: blobstorage.RemotePrefix, Generation: "check", Levels: levels}
	}
	st, err := state.OpenCheckpoint(ctx, c.storage.StateDir(cp.ID), filepath.Join(work, "state"), opts)
	if err != nil {
		return Check{}, fmt.Errorf("demo: check: open state of %s: %w", cp.ID, err)
	}
	defer st.Close()
	got := map[string]uint64{}
	var total uint64
	for _, o := range ownerIDs(DefaultOwners) {
		p, err := openPartition(st, o)
		if err == nil {
			err = p.addAll(got)
		}
		var n uint64
		if err == nil {
			n, err = p.total()
		}
		if err != nil {
			return Check{}, err
		}
		total += n
	}
	out := Output{Counts: map[string]uint64{}}
	for k := range DefaultOwners {
		o, err := blobOutput(ctx, c.wc.Sink.bs, SlotOutputPrefix(k), func(string) bool { return true })
		if err != nil {
			return Check{}, err
		}
		for w, n := range o.Counts {
			out.Counts[w] += n
		}
		out.Committed += o.Committed
	}
	src := NewSource(c.wc.Records, c.wc.Words)
	chk := checkExactlyOnce(src, out, got, Base{}, nil)
	if total != src.Records() {
		chk.StateWrong++
		chk.StateDiff = append(chk.StateDiff, fmt.Sprintf("records in the state: got %d, want %d", total, src.Records()))
	}
	return chk, nil
}
