package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"time"

	"github.com/tidemark-io/tidemark/blobstorage"
)

// replicaPfx is the replica's prefix in the third store.
const replicaPfx = "replica"

// replicator runs tidemark replicate's engine beside the job, one pass
// every few seconds, from the job's store to the replica: a process
// like any other, whose calls fail, stall and crash. A crash ends one
// incarnation (r1, r2, …), and the next takes the replica's writer role
// over, as a restarted replicate does. After each pass the replica's
// latest completed checkpoint must be whole (checkReplica).
func (w *World) replicator(ctx context.Context, p *proc, n int) {
	crashed := false
	defer func() {
		w.mu.Lock()
		stopping := w.stopping
		if !crashed || n >= 8 {
			w.repDone = true
		}
		w.mu.Unlock()
		if crashed && !stopping && n < 8 {
			t := time.NewTimer(3 * time.Second)
			defer t.Stop()
			<-t.C
			w.mu.Lock()
			stopping = w.stopping
			if stopping {
				w.repDone = true
			}
			w.mu.Unlock()
			if stopping {
				return // the run ended meanwhile: nothing would stop it
			}
			w.spawn(fmt.Sprintf("r%d", n+1), false, func(ctx context.Context, p *proc) { w.replicator(ctx, p, n+1) })
		}
	}()
	rng := rand.New(rand.NewPCG(w.cfg.Seed, 20+uint64(n)))
	rep := blobstorage.NewReplicator(w.job, w.replica, blobstorage.ReplicateOptions{
		Keep: keep, Grace: grace, PinTTL: pinTTL, GCEvery: 3, Name: p.name, Concurrency: 1,
	})
	for pass := 0; ; pass++ {
		// Once the job is done, one more pass (its last checkpoint),
		// then stop: the run ends when every process has. A run that
		// ends otherwise (its step budget) cancels ctx.
		w.mu.Lock()
		jobDone := w.finished || pass >= 500
		w.mu.Unlock()
		t := time.NewTimer(time.Duration(500+rng.IntN(2500)) * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			crashed = true
			return
		case <-t.C:
		}
		pass, err := rep.Once(ctx)
		if ctx.Err() != nil {
			crashed = true
			return
		}
		if err != nil {
			w.sched.Note(p.name, "replicate: %v", err)
		} else {
			w.sched.Note(p.name, "replicate: replica at %s", pass.Replica)
		}
		w.checkReplica(p.name)
		if jobDone {
			return
		}
	}
}

// checkReplica fails the run unless the checkpoint the replica's
// _latest-completed names has its record and every file the record
// names: the replica is restorable at every moment, however its
// replicator died.
func (w *World) checkReplica(who string) {
	body, ok := w.replicas.Object(replicaPfx + "/_latest-completed")
	if !ok {
		return
	}
	var ptr struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(body, &ptr); err != nil || ptr.ID == "" {
		return
	}
	rec, ok := w.replicas.Object(replicaPfx + "/checkpoints/" + ptr.ID + "/checkpoint.json")
	if !ok {
		w.Violation("after %s: the replica's _latest-completed names %s, which has no record", who, ptr.ID)
		return
	}
	var r blobstorage.Record
	if err := json.Unmarshal(rec, &r); err != nil {
		w.Violation("after %s: the replica's record of %s does not decode: %v", who, ptr.ID, err)
		return
	}
	for _, files := range r.Files {
		for _, f := range files {
			if _, ok := w.replicas.Object(replicaPfx + "/" + f.Key); !ok {
				w.Violation("after %s: the replica's latest completed %s lacks %s", who, ptr.ID, f.Key)
				return
			}
		}
	}
}

// finalReplica runs a faultless pass, then checks that the replica holds
// the job's latest completed checkpoint and that it restores to the state
// its record says.
func (c *checker) finalReplica(ctx context.Context) {
	w := c.w
	ctx = WithProc(ctx, "final-replicate")
	rep := blobstorage.NewReplicator(w.job, w.replica, blobstorage.ReplicateOptions{Keep: keep, Grace: grace, PinTTL: pinTTL, Name: "final-replicate"})
	pass, err := rep.Once(ctx)
	if err != nil {
		w.Violation("the faultless replicator failed: %v", err)
		return
	}
	want := c.last[keyCompleted].ID
	if pass.Replica != want {
		w.Violation("after a faultless pass the replica holds %q, the job's latest completed is %q", pass.Replica, want)
		return
	}
	w.checkReplica("final-replicate")
	chk := blobstorage.New(w.replica, filepath.Join(w.cfg.Dir, "check-replica"), blobstorage.Options{BufferedRestore: true, PinTTL: pinTTL})
	ctx = WithProc(ctx, "check")
	cp, err := chk.LoadSpecific(ctx, want)
	if err != nil {
		w.Violation("the replica's %s does not load: %v", want, err)
		return
	}
	if err := chk.Restore(ctx, want); err != nil {
		w.Violation("the replica's %s does not restore: %v", want, err)
		return
	}
	w.checkRestored(w.replica, chk.StateDir(want), cp, "replica's checkpoint "+want)
}
