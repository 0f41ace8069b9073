package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/state"
)

// WorkerConfig describes one worker process of a job run by RunWorkers.
type WorkerConfig struct {
	// Coordinator is the address (host:port) the coordinator listens on
	// for its workers.
	Coordinator string
	// Slot is the worker's place in the job, 0 … Workers-1.
	Slot int
	// Dir is the worker's local directory: its live state and its local
	// copies of checkpoints. It should be empty: the worker trusts only
	// what it wrote itself in this life, and takes the rest from the store.
	Dir string
	// Open opens the store the coordinator names. Default: blobstore.Open.
	Open func(ctx context.Context, url string) (blobstore.Blobstore, error)
	// Token is the job's worker token (WorkersConfig.Token), presented
	// in the worker's hello; empty when the coordinator has none.
	Token string
	// DialTimeout bounds how long the worker tries to reach the
	// coordinator (it may start first). Default: one minute.
	DialTimeout time.Duration
	// Notify, if set, is told what the worker waits for, for its user:
	// that the coordinator is not reachable yet (once, when the first
	// attempt fails), that it waits as the standby of a slot that has a
	// live worker. Default: the Logger, at level info.
	Notify func(msg string)
	// Logger receives the worker's log. Default: discard.
	Logger *slog.Logger
	// Observer, if set, hears of the worker's restores and, if it is a
	// blobstorage.PartObserver (metrics.CheckpointMetrics is), of every
	// part it saves.
	Observer blobstorage.Observer
}

// ErrCoordinatorGone is wrapped by ServeWorker's error when the
// connection to the coordinator broke before the coordinator said the
// job was done: the coordinator died, or replaced this worker.
var ErrCoordinatorGone = errors.New("demo: coordinator gone")

// ErrWorkerRefused is wrapped by ServeWorker's error when the
// coordinator refused the worker's hello (its slot is out of range, or
// it speaks another protocol version); the error says why.
var ErrWorkerRefused = errors.New("refused by the coordinator")

// ServeWorker runs one worker of a job whose coordinator runs RunWorkers:
// it connects to cfg.Coordinator, introduces itself with a new worker id
// (blobstorage.NewWorkerID), and then does what the coordinator asks:
// open its owners (from its own last checkpoint on its disk, or restored
// from the store with blobstorage.Worker.Restore, or empty), fold batches
// of records into their state, and at every barrier take a Pebble
// checkpoint of its owners and save it as its part of the checkpoint
// (blobstorage.Worker.SavePart). It returns nil when the coordinator
// says the job is done, and an error wrapping ErrCoordinatorGone when the
// connection breaks first.
func ServeWorker(ctx context.Context, cfg WorkerConfig) error {
	if cfg.Coordinator == "" || cfg.Dir == "" || cfg.Slot < 0 {
		return errors.New("demo: worker: Coordinator, Dir and a slot ≥ 0 are required")
	}
	if cfg.Open == nil {
		cfg.Open = blobstore.Open
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Notify == nil {
		cfg.Notify = func(msg string) { cfg.Logger.Info("demo worker: " + msg) }
	}
	if _, _, err := net.SplitHostPort(cfg.Coordinator); err != nil {
		return fmt.Errorf("demo: worker: coordinator address %q: want HOST:PORT: %w", cfg.Coordinator, err)
	}
	w := &workerProc{cfg: cfg, id: blobstorage.NewWorkerID(fmt.Sprintf("slot%d", cfg.Slot)), saved: map[string]map[string]bool{}}
	if err := blobstorage.ValidateWorkerID(w.id); err != nil {
		return fmt.Errorf("demo: worker: %w", err)
	}
	defer w.closeStores()
	conn, err := dialCoordinator(ctx, cfg.Coordinator, cfg.DialTimeout, cfg.Notify)
	if err != nil {
		return err
	}
	c := newWireConn(conn)
	defer c.close()
	stop := context.AfterFunc(ctx, func() { _ = c.close() })
	defer stop()
	if err := c.send(wireHello{Version: wireVersion, Slot: cfg.Slot, Worker: w.id, Token: cfg.Token}); err != nil {
		return fmt.Errorf("demo: worker %s: hello: %w: %w", w.id, ErrCoordinatorGone, err)
	}
	cfg.Logger.Info("demo worker: connected", "worker", w.id, "coordinator", cfg.Coordinator)
	for {
		var req wireRequest
		if err := c.recv(&req); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
				err = errors.New("connection closed")
			}
			return fmt.Errorf("demo: worker %s: %w: %w", w.id, ErrCoordinatorGone, err)
		}
		if req.Op == opRefuse {
			return fmt.Errorf("demo: worker %s: %w: %s", w.id, ErrWorkerRefused, req.Reason)
		}
		if req.Op == opStandby {
			cfg.Notify(req.Reason)
			continue
		}
		if req.Op == opStop {
			_ = c.send(wireReply{})
			cfg.Logger.Info("demo worker: done", "worker", w.id)
			return nil
		}
		rep, err := handleWatched(ctx, c, func(ctx context.Context) (*wireReply, error) { return w.handle(ctx, &req) })
		if errors.Is(err, ErrCoordinatorGone) {
			return fmt.Errorf("demo: worker %s: %s: %w", w.id, req.Op, err)
		}
		if err != nil {
			rep = &wireReply{Err: err.Error()}
			cfg.Logger.Warn("demo worker: request failed", "worker", w.id, "op", req.Op, "err", err)
		}
		if err := c.send(rep); err != nil {
			return fmt.Errorf("demo: worker %s: reply: %w: %w", w.id, ErrCoordinatorGone, err)
		}
	}
}

// handleWatched runs handle while watching the connection: the
// coordinator sends nothing while it waits for a reply, so a read that
// returns means it closed the connection (it died, or gave up on this
// worker), and handle's context is cancelled at once instead of letting
// an upload or a download run on for nobody.
func handleWatched(ctx context.Context, c *wireConn, handle func(context.Context) (*wireReply, error)) (*wireReply, error) {
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var gone error
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		var b [1]byte
		_, err := c.r.Read(b[:])
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return // the deadline below: handle is done
		}
		if err == nil {
			err = errors.New("the coordinator sent a request before the reply to the previous one")
		}
		gone = err
		cancel()
	}()
	rep, err := handle(hctx)
	_ = c.conn.SetReadDeadline(time.Unix(1, 0)) // stop the watch
	<-watched
	_ = c.conn.SetReadDeadline(time.Time{})
	if gone != nil {
		return nil, fmt.Errorf("%w while handling the request: %w", ErrCoordinatorGone, gone)
	}
	return rep, err
}

// dialCoordinator connects to addr, retrying until timeout: the
// coordinator may not listen yet. When the first attempt fails it tells
// notify that it waits; its error says why the last attempt failed, when
// ctx ends the wait too.
func dialCoordinator(ctx context.Context, addr string, timeout time.Duration, notify func(string)) (net.Conn, error) {
	deadline := time.Now().Add(timeout)
	var d net.Dialer
	var last error // the last attempt's error that was not ctx's
	for attempt := 0; ; attempt++ {
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		conn, err := d.DialContext(dctx, "tcp", addr)
		cancel()
		if err == nil {
			return conn, nil
		}
		if ctx.Err() != nil {
			return nil, unreachable(addr, ctx.Err(), last)
		}
		last = err
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("demo: worker: reach the coordinator at %s: %w", addr, err)
		}
		if attempt == 0 {
			notify(fmt.Sprintf("waiting for the coordinator at %s (up to %v)…", addr, timeout))
		}
		select {
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
			return nil, unreachable(addr, ctx.Err(), last)
		}
	}
}

// unreachable is dialCoordinator's error when ctx ended the wait (ctxErr):
// it keeps why the coordinator could not be reached.
func unreachable(addr string, ctxErr, last error) error {
	if last == nil {
		return fmt.Errorf("demo: worker: reach the coordinator at %s: %w", addr, ctxErr)
	}
	return fmt.Errorf("demo: worker: the coordinator at %s was unreachable (%v): %w", addr, last, ctxErr)
}

// workerProc is the state of one worker process.
type workerProc struct {
	cfg WorkerConfig
	id  string

	storeURL string
	bw       *blobstorage.Worker
	opts     state.Options

	owners []string
	stores map[string]*state.Store // owner → its Store (one owner each)
	// saved records the checkpoints this incarnation saved parts of, and
	// of which owners: only those local state directories are trusted on
	// a rollback.
	saved map[string]map[string]bool
}

func (w *workerProc) liveDir() string { return filepath.Join(w.cfg.Dir, "live") }

func (w *workerProc) closeStores() {
	for _, st := range w.stores {
		_ = st.Close()
	}
	w.stores = nil
}

func (w *workerProc) handle(ctx context.Context, req *wireRequest) (*wireReply, error) {
	switch req.Op {
	case opOpen:
		return w.open(ctx, req)
	case opBatch:
		return w.batch(req)
	case opBarrier:
		return w.barrier(ctx, req)
	}
	return nil, fmt.Errorf("unknown operation %q", req.Op)
}

// open (re)opens the owners of req: empty, or from checkpoint
// req.Checkpoint, taking each owner from this worker's own state
// directory of that checkpoint when it saved it, and downloading the
// others.
func (w *workerProc) open(ctx context.Context, req *wireRequest) (*wireReply, error) {
	if w.bw == nil || req.Store != w.storeURL {
		bs, err := w.cfg.Open(ctx, req.Store)
		if err != nil {
			return nil, fmt.Errorf("open store: %w", err)
		}
		w.bw, err = blobstorage.NewWorker(bs, filepath.Join(w.cfg.Dir, "checkpoints"), w.id,
			blobstorage.Options{Concurrency: req.Concurrency, Logger: w.cfg.Logger, Observer: w.cfg.Observer})
		if err != nil {
			return nil, err
		}
		w.storeURL = req.Store
	}
	w.opts = state.Options{MemTableSize: req.MemTableSize, CacheSize: req.CacheSize}
	for _, o := range req.Owners {
		if err := state.ValidateOwnerID(o); err != nil {
			return nil, err
		}
	}
	w.closeStores()
	if err := os.RemoveAll(w.liveDir()); err != nil {
		return nil, fmt.Errorf("clear live state: %w", err)
	}
	w.owners = slices.Sorted(slices.Values(req.Owners))
	w.stores = map[string]*state.Store{}
	rep := &wireReply{Totals: map[string]uint64{}}
	id := req.Checkpoint
	if id != "" {
		if err := checkpoint.ValidateID(id); err != nil {
			return nil, err
		}
		mine := w.saved[id]
		local := true
		for _, o := range w.owners {
			if !mine[o] {
				local = false
			}
		}
		if local {
			rep.Local = w.owners
		} else {
			// Anything of id on this disk is not trusted: download all
			// of this worker's owners.
			if err := w.bw.RemoveStateDir(id); err != nil {
				return nil, err
			}
			delete(w.saved, id)
			if err := w.bw.Restore(ctx, id, w.owners); err != nil {
				return nil, fmt.Errorf("restore owners %s of %s: %w", strings.Join(w.owners, ","), id, err)
			}
			rep.Downloaded = w.owners
		}
		w.prune(id, "")
	}
	// The owners are independent databases: open them in parallel
	// (each open waits for its own fsyncs).
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	for _, o := range w.owners {
		g.Go(func() error {
			live := filepath.Join(w.liveDir(), o)
			var st *state.Store
			var err error
			if id == "" {
				st, err = state.Open(live, w.opts)
			} else {
				st, err = state.OpenCheckpoint(gctx, filepath.Join(w.bw.StateDir(id), o), live, w.opts)
			}
			if err != nil {
				return fmt.Errorf("open owner %s: %w", o, err)
			}
			mu.Lock()
			w.stores[o] = st
			mu.Unlock()
			p, err := openPartition(st, o)
			if err != nil {
				return err
			}
			n, err := p.total()
			mu.Lock()
			rep.Totals[o] = n
			mu.Unlock()
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return rep, nil
}

// batch folds the records of each owner into its state.
func (w *workerProc) batch(req *wireRequest) (*wireReply, error) {
	deltas := map[string]uint64{}
	for _, o := range slices.Sorted(maps.Keys(req.Records)) {
		st, ok := w.stores[o]
		if !ok {
			return nil, fmt.Errorf("owner %s is not open on this worker", o)
		}
		p, err := openPartition(st, o)
		if err != nil {
			return nil, err
		}
		if err := p.add(req.Records[o]); err != nil {
			return nil, err
		}
		for word, n := range req.Records[o] {
			deltas[word] += n
		}
	}
	return &wireReply{Deltas: deltas}, nil
}

// barrier checkpoints every owner into StateDir(id)/<owner> and saves the
// part.
func (w *workerProc) barrier(ctx context.Context, req *wireRequest) (*wireReply, error) {
	if w.bw == nil || w.stores == nil {
		return nil, errors.New("barrier before open")
	}
	id := req.ID
	if err := checkpoint.ValidateID(id); err != nil {
		return nil, err
	}
	// A local directory of id can only be a leftover of an attempt that
	// never committed (ids are never reused once persisted).
	delete(w.saved, id)
	if err := w.bw.RemoveStateDir(id); err != nil {
		return nil, fmt.Errorf("clear leftover state of %s: %w", id, err)
	}
	dirs := map[string]string{}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	for _, o := range w.owners {
		g.Go(func() error {
			got, err := w.stores[o].Checkpoint(gctx, filepath.Join(w.bw.StateDir(id), o))
			if err != nil {
				return fmt.Errorf("checkpoint owner %s: %w", o, err)
			}
			mu.Lock()
			defer mu.Unlock()
			for owner, rel := range got {
				dirs[owner] = o + "/" + rel
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	st, err := w.bw.SavePart(ctx, req.Epoch, &checkpoint.CheckpointData{
		ID: id, Timestamp: time.Now().UTC(), Status: checkpoint.StatusPrepared, StateDirs: dirs,
	})
	if err != nil {
		return nil, fmt.Errorf("save part of %s: %w", id, err)
	}
	w.saved[id] = map[string]bool{}
	for _, o := range w.owners {
		w.saved[id][o] = true
	}
	w.prune(id, req.Keep)
	return &wireReply{Dirs: dirs, UploadedFiles: st.UploadedFiles, UploadedBytes: st.UploadedBytes}, nil
}

// prune removes the local state directories of every checkpoint but keep
// and keep2.
func (w *workerProc) prune(keep, keep2 string) {
	for id := range w.saved {
		if id != keep && id != keep2 {
			delete(w.saved, id)
		}
	}
	root := filepath.Join(w.cfg.Dir, "checkpoints")
	entries, err := os.ReadDir(root)
	if err != nil {
		return
	}
	// A state directory and its siblings (blobstorage's boot marker
	// <id>.state.boot) share the directory's name as a prefix.
	kept := func(name string) bool {
		for _, k := range []string{keep, keep2} {
			if k != "" && strings.HasPrefix(name, filepath.Base(w.bw.StateDir(k))) {
				return true
			}
		}
		return false
	}
	for _, e := range entries {
		if !kept(e.Name()) {
			_ = os.RemoveAll(filepath.Join(root, e.Name()))
		}
	}
}
