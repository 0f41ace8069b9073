package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
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
		switch a := rng.IntN(14); a {
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
		case 9, 10:
			// tidemark gc --confirm (it takes the writer role, fencing
			// the job) while a restore of the oldest checkpoint, the
			// one GC drops first, runs in another terminal.
			ids, err := st.IDs(ctx)
			if err != nil {
				continue
			}
			w.sched.Note(p.name, "gc --confirm")
			gc := blobstorage.New(w.job, filepath.Join(p.dir, "gc"), opts)
			epoch, err := gc.Acquire(ctx)
			if err != nil {
				continue
			}
			w.checks.writerEpoch(p.name, epoch)
			delay := 50*time.Millisecond + time.Duration(rng.Int64N(int64(200*time.Millisecond)))
			var wg sync.WaitGroup
			wg.Go(func() {
				// Some time into the GC (it lists, then deletes).
				time.Sleep(delay)
				w.sched.Note(p.name, "restore the oldest completed beside gc --confirm")
				for _, id := range ids {
					if w.operatorRestore(ctx, st, id) {
						return
					}
				}
			})
			_, _ = gc.GC(ctx, blobstorage.GCOptions{})
			wg.Wait()
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
	w.checkRestored(st.StateDir(id), cp, "restore "+id)
	_ = st.RemoveStateDir(id)
	return true
}

// checkRestored compares a restored state directory with its record.
func (w *World) checkRestored(dir string, cp *checkpoint.CheckpointData, what string) {
	if w.cfg.Runtime {
		w.checkJobState(dir, cp, what)
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
	w.checkRestored(dst.StateDir(id), cp, "savepoint "+label+" in region 2")
}
