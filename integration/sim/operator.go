package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"iter"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tidemark-io/tidemark/archive"
	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
)

// operator runs beside the job what an operator runs: dry-run and real
// GC, verify, restores, savepoint create, restore (into a second region)
// and rm.
//
// A crash ends one operator process (one command); the next starts after
// a while, as an operator would run the next command.
func (w *World) operator(ctx context.Context, p *proc, n int) {
	finished := true
	defer func() {
		w.mu.Lock()
		stopping := w.stopping
		if finished || n >= 8 {
			w.opDone = true
		}
		w.mu.Unlock()
		if !finished && !stopping && n < 8 {
			t := time.NewTimer(2 * time.Second)
			defer t.Stop()
			<-t.C
			w.spawn(fmt.Sprintf("op%d", n+1), false, func(ctx context.Context, p *proc) { w.operator(ctx, p, n+1) })
		}
	}()
	rng := rand.New(rand.NewPCG(w.cfg.Seed, 3+uint64(n)))
	opts := blobstorage.Options{Keep: keep, Grace: grace, PinTTL: pinTTL, WriterName: p.name, BufferedRestore: true, Concurrency: 2}
	st := blobstorage.New(w.job, filepath.Join(p.dir, "ro"), opts)
	var labels []string
	for i := 0; i < 60; i++ {
		t := time.NewTimer(time.Duration(200+rng.IntN(4000)) * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			finished = false
			return
		case <-t.C:
		}
		w.mu.Lock()
		jobDone := w.finished
		w.mu.Unlock()
		if jobDone && i > 10 {
			return
		}
		if ctx.Err() != nil {
			finished = false
			return
		}
		switch a := rng.IntN(16); a {
		case 0, 1:
			w.sched.Note(p.name, "gc --dry-run")
			_, _ = st.GC(ctx, blobstorage.GCOptions{DryRun: true})
		case 2:
			id, err := st.PointerID(ctx, blobstorage.PointerLatestCompleted)
			if err == nil && id != "" {
				w.sched.Note(p.name, "verify %s", id)
				if err := st.Verify(ctx, id); errors.Is(err, archive.ErrCorrupt) {
					w.Violation("verify %s: %v", id, err)
				}
			}
		case 3, 4:
			label := fmt.Sprintf("sp-%d", i)
			w.sched.Note(p.name, "savepoint create %s", label)
			if _, err := checkpoint.CreateSavepoint(ctx, st, w.job, label); err == nil {
				labels = append(labels, label)
			}
		case 5:
			if len(labels) > 0 {
				w.restoreSavepoint(ctx, p, opts, labels[rng.IntN(len(labels))], i)
			}
		case 6:
			if len(labels) > 0 {
				j := rng.IntN(len(labels))
				w.sched.Note(p.name, "savepoint rm %s", labels[j])
				if checkpoint.DeleteSavepoint(ctx, w.job, labels[j]) == nil {
					labels = slices.Delete(labels, j, j+1)
				}
			}
		case 7, 8, 11, 12, 13:
			ids, err := st.IDs(ctx)
			if err != nil || len(ids) == 0 {
				continue
			}
			// Mostly the oldest: the one retention drops next, so that
			// restores race GC.
			id := ids[0]
			if rng.IntN(3) == 0 {
				id = ids[rng.IntN(len(ids))]
			}
			w.sched.Note(p.name, "restore %s", id)
			w.operatorRestore(ctx, st, id)
		case 9, 10, 14, 15:
			// tidemark gc, then gc --confirm as the CLI runs it: no
			// writer role, beside the live writers (docs/gc.md), while
			// another terminal restores what the dry run said goes.
			// One of the two may run far away, each of its calls taking
			// up to a second: a GC whose view of the job ages while it
			// runs (the job re-takes the writer role, saves on), or a
			// restore that takes long (a big state) while GC deletes.
			gcLink, restoreLink, what := w.job, w.job, "gc --confirm"
			span := 250 * time.Millisecond // a run takes a few dozen calls
			switch rng.IntN(3) {
			case 1:
				gcLink, what = &slowLink{Blobstore: w.job, sched: w.sched, seed: rng.Uint64()}, "gc --confirm over a slow link"
				span = 3 * time.Second // its first reads, when its view of the job is taken
			case 2:
				// A big state: the record comes at once, the files slowly.
				restoreLink, what = &slowLink{Blobstore: w.job, sched: w.sched, seed: rng.Uint64(), filesOnly: true}, "gc --confirm, a restore over a slow link"
			}
			gc := blobstorage.New(gcLink, filepath.Join(p.dir, "gc"), opts)
			w.sched.Note(p.name, "gc")
			dry, err := gc.GC(ctx, blobstorage.GCOptions{DryRun: true})
			if err != nil {
				continue
			}
			// Now and then the explicit override, gc --confirm --fence:
			// it takes the writer role, fencing the job, which then takes
			// it back (and fences this run) while it deletes.
			fence := rng.IntN(4) == 0
			if fence {
				what += " --fence"
				epoch, err := gc.Acquire(ctx)
				if err != nil {
					w.checks.noWriter(p.name)
					continue
				}
				w.checks.writerEpoch(p.name, epoch)
			}
			ids := slices.Concat(dry.Dropped, dry.Retained)
			w.sched.Note(p.name, "%s", what)
			delay := time.Duration(rng.Int64N(int64(span)))
			var wg sync.WaitGroup
			switch rng.IntN(3) {
			case 0:
				// A failover meanwhile (a deploy, a node thought dead):
				// a new writer takes over from the live one during the
				// run, and the run must not take the new one's fresh
				// work for the dead epoch's.
				// Over a slow link, mostly within its first reads: the
				// new writer saves while the run still lists what the
				// dead epoch left, the window grace protects.
				at := time.Duration(rng.Int64N(int64(span)))
				if gcLink != w.job && rng.IntN(2) == 0 {
					at /= 4
				}
				wg.Go(func() {
					time.Sleep(at)
					w.sched.Note(p.name, "a failover beside %s", what)
					w.startWriter()
				})
			case 1:
				// A failover just before (a deploy, then a GC): the new
				// writer recovers, and may roll forward, what the old one
				// left prepared, while the run reads it as a dead
				// writer's.
				w.sched.Note(p.name, "a failover, then %s", what)
				w.startWriter()
			}
			wg.Go(func() {
				time.Sleep(delay)
				w.sched.Note(p.name, "restore what gc drops, beside %s", what)
				near := blobstorage.New(restoreLink, filepath.Join(p.dir, "near"), opts)
				for _, id := range ids {
					if w.operatorRestore(ctx, near, id) {
						return
					}
				}
			})
			rep, err := gc.GC(ctx, blobstorage.GCOptions{})
			switch {
			case errors.Is(err, blobstorage.ErrForeignStore) || (!fence && errors.Is(err, checkpoint.ErrFenced)):
				// The job's own keys all parse; a GC with no role is never fenced.
				w.Violation("%s beside the job: %v", what, err)
			case err == nil:
				w.sched.Note(p.name, "%s: dropped %v, deleted %d objects", what, rep.Dropped, rep.Objects)
			default:
				w.sched.Note(p.name, "%s: %v", what, err)
			}
			wg.Wait()
			if fence {
				w.checks.noWriter(p.name)
			}
		}
	}
}

// operatorRestore restores id and checks what it got, when it got it. It
// reports whether id was a completed checkpoint it tried to restore.
func (w *World) operatorRestore(ctx context.Context, st *blobstorage.Storage, id string) bool {
	cp, err := st.LoadSpecific(ctx, id)
	if err != nil || !cp.Completed() {
		return false
	}
	w.sched.Note(ProcName(ctx), "restoring %s", id)
	start := time.Now()
	if err := st.Restore(ctx, id); err != nil {
		w.sched.Note(ProcName(ctx), "restore %s failed: %v", id, err)
		switch {
		case !errors.Is(err, archive.ErrCorrupt):
		case errors.Is(err, blobstore.ErrNotFound) && time.Since(start) >= w.pinLife():
			w.sched.Note("check", "restore %s outlived its pin (PinTTL less the store's clock skew): the documented limit", id)
		case errors.Is(err, blobstore.ErrNotFound) && w.checks.staleSince(id, start):
			w.sched.Note("check", "restore %s lost files to a GC that a stale listing hid its pin from", id)
		case errors.Is(err, blobstore.ErrNotFound):
			// It read the record after pinning: the pin did not hold.
			w.Violation("pin did not hold: restore %s: %v", id, err)
		default:
			w.Violation("restore %s: %v", id, err)
		}
		return true
	}
	w.checkRestored(w.job, st.StateDir(id), cp, "restore "+id)
	_ = st.RemoveStateDir(id)
	return true
}

// checkRestored compares a restored state directory with its record; the
// checkpoint is in bs (its remote SSTs, in remote mode).
func (w *World) checkRestored(bs blobstore.Blobstore, dir string, cp *checkpoint.CheckpointData, what string) {
	if w.cfg.Workers {
		w.checkSlotsState(dir, cp, what)
		return
	}
	if w.cfg.Runtime {
		w.checkJobState(bs, dir, cp, what)
		return
	}
	var want state
	if err := json.Unmarshal(cp.Operators["job"], &want); err != nil {
		w.Violation("%s: state does not decode: %v", what, err)
		return
	}
	got, _, err := readStateDir(dir)
	if err != nil || got != want {
		w.Violation("%s: state dir %+v (%v), record %+v", what, got, err, want)
	}
}

// restoreSavepoint restores a savepoint into the second region's store
// and checks the checkpoint it becomes.
func (w *World) restoreSavepoint(ctx context.Context, p *proc, opts blobstorage.Options, label string, i int) {
	w.sched.Note(p.name, "savepoint restore %s into region 2", label)
	dir := filepath.Join(p.dir, fmt.Sprintf("region-%d", i))
	defer os.RemoveAll(dir)
	dst := blobstorage.New(w.region, dir, opts)
	if _, err := dst.Acquire(ctx); err != nil {
		return
	}
	id, err := checkpoint.RestoreSavepoint(ctx, dst, w.job, label)
	if err != nil {
		if errors.Is(err, archive.ErrCorrupt) {
			w.Violation("savepoint %s: %v", label, err)
		}
		return
	}
	cp, err := dst.LoadLatestCompleted(ctx)
	if err != nil {
		return
	}
	if cp == nil || cp.ID != id {
		w.Violation("savepoint %s restored as %s, but region 2's latest completed is %v", label, id, idOf(cp))
		return
	}
	if err := dst.Restore(ctx, id); err != nil {
		return
	}
	w.checkRestored(w.region, dst.StateDir(id), cp, "savepoint "+label+" in region 2")
}

// pinLife is how long a pin holds as GC sees it: PinTTL, less how far the
// store's clock runs behind (a pin's LastModified looks that much older),
// the skew docs/gc.md says PinTTL must cover besides the longest restore.
func (w *World) pinLife() time.Duration { return pinTTL - w.store.Behind }

// slowLink delays every call by up to a second of the simulation's time,
// as an operator's far-away link does. The delay is a hash of the seed,
// the operation and the key, not a draw: calls made in parallel take
// theirs in whatever order and the run still replays.
type slowLink struct {
	blobstore.Blobstore
	sched *Scheduler
	seed  uint64
	// filesOnly delays only what is not a record, a pointer or a pin.
	filesOnly bool
}

func (l *slowLink) Unwrap() blobstore.Blobstore { return l.Blobstore }

// wait holds a call for its delay and returns its context, which says
// when the call was sent.
func (l *slowLink) wait(ctx context.Context, op, key string) context.Context {
	if l.filesOnly && (strings.HasSuffix(key, "/checkpoint.json") || strings.HasPrefix(key, "_") || strings.HasPrefix(key, "pins/")) {
		return ctx
	}
	ctx = withSent(ctx, l.sched.Step())
	h := fnv.New64a()
	fmt.Fprintf(h, "%d %s %s", l.seed, op, key)
	t := time.NewTimer(time.Duration(h.Sum64() % uint64(time.Second)))
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	return ctx
}

func (l *slowLink) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	ctx = l.wait(ctx, "get", key)
	return l.Blobstore.Get(ctx, key)
}

func (l *slowLink) GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	ctx = l.wait(ctx, "get", key)
	return l.Blobstore.GetRange(ctx, key, offset, length)
}

func (l *slowLink) Stat(ctx context.Context, key string) (blobstore.ObjectInfo, error) {
	ctx = l.wait(ctx, "stat", key)
	return l.Blobstore.Stat(ctx, key)
}

func (l *slowLink) Exists(ctx context.Context, key string) (bool, error) {
	ctx = l.wait(ctx, "stat", key)
	return l.Blobstore.Exists(ctx, key)
}

func (l *slowLink) Put(ctx context.Context, key string, r io.Reader) error {
	ctx = l.wait(ctx, "put", key)
	return l.Blobstore.Put(ctx, key, r)
}

func (l *slowLink) Delete(ctx context.Context, key string) error {
	ctx = l.wait(ctx, "delete", key)
	return l.Blobstore.Delete(ctx, key)
}

func (l *slowLink) List(ctx context.Context, prefix string) iter.Seq2[blobstore.ObjectInfo, error] {
	ctx = l.wait(ctx, "list", prefix)
	return l.Blobstore.List(ctx, prefix)
}
