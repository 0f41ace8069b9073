package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/savepoint"
)

// checker watches every call's outcome for the invariants that hold at
// each step, and runs the checks at the end of a run.
type checker struct {
	w *World

	mu     sync.Mutex
	epochs map[string]uint64 // process → the epoch it last wrote to _writer
	// released are processes whose command with the writer role ended
	// (noWriter): a late write of theirs to _writer gives them no role.
	released map[string]bool
	maxEpoch uint64
	writes   []epochWrite           // every _writer write that applied
	last     map[string]pointerBody // pointer key → last applied write
	named    map[string]bool        // ids _latest-completed ever named
	listedAt map[string]time.Time   // process → as-of time of its last listing of pins/
	pins     map[string]time.Time   // pin key → when written
	// stalePins is when a listing of one checkpoint's pins was last
	// stale: a pin it hid does not protect (see staleSince).
	stalePins map[string]time.Time

	committedRecords int
}

type epochWrite struct {
	epoch uint64
	step  int
}

type pointerBody struct {
	ID    string `json:"id"`
	Epoch uint64 `json:"epoch"`
}

func newChecker(w *World) *checker {
	return &checker{w: w, epochs: map[string]uint64{}, released: map[string]bool{}, last: map[string]pointerBody{}, named: map[string]bool{},
		listedAt: map[string]time.Time{}, pins: map[string]time.Time{}, stalePins: map[string]time.Time{}}
}

const (
	keyWriter    = jobPfx + "/_writer"
	keyLatest    = jobPfx + "/_latest"
	keyCompleted = jobPfx + "/_latest-completed"
	pinsDir      = jobPfx + "/pins/"
)

func recordKey(id string) string { return jobPfx + "/checkpoints/" + id + "/checkpoint.json" }

// writerEpoch notes the epoch Acquire returned to a process.
func (c *checker) writerEpoch(proc string, epoch uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epochs[proc] = epoch
	delete(c.released, proc)
}

// noWriter notes that proc holds no writer role any more: an operator's
// command that took one (gc --confirm --fence) has ended, and its next
// commands take none.
func (c *checker) noWriter(proc string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.epochs, proc)
	c.released[proc] = true
}

// fencedLocked reports whether proc was fenced when it issued a call
// released at step: a greater epoch had taken _writer by then. A call
// issued before the fence and applied after it (stalled, or frozen with
// its process) is the window no unconditional delete can close.
func (c *checker) fencedLocked(proc string, step int) (uint64, bool) {
	e, ok := c.epochs[proc]
	if !ok {
		return 0, false
	}
	for _, w := range c.writes {
		if w.epoch > e && w.step <= step {
			return e, true
		}
	}
	return e, false
}

// event checks one call's outcome.
func (c *checker) event(done int, ev Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if ev.Op == "list" && strings.HasPrefix(pinsDir, ev.Key) && ev.Err == nil {
		c.listedAt[ev.Proc] = now.Add(-ev.Fault.StaleBy)
	}
	if ev.Op == "list" && strings.HasPrefix(ev.Key, pinsDir) && ev.Fault.StaleBy > 0 {
		id, _, _ := strings.Cut(strings.TrimPrefix(ev.Key, pinsDir), "/")
		c.stalePins[id] = now
	}
	if !ev.Applied {
		return
	}
	switch {
	case ev.Key == keyWriter && ev.Op != "delete":
		var wr struct {
			Epoch uint64 `json:"epoch"`
		}
		if err := json.Unmarshal(ev.Body, &wr); err == nil {
			// Taking a new epoch is what Acquire does, fenced or not.
			if !c.released[ev.Proc] {
				c.epochs[ev.Proc] = wr.Epoch
			}
			c.writes = append(c.writes, epochWrite{epoch: wr.Epoch, step: done})
			c.maxEpoch = max(c.maxEpoch, wr.Epoch)
		}
	case ev.Key == keyLatest || ev.Key == keyCompleted:
		if ev.Op == "delete" {
			c.w.Violation("%s deleted pointer %s", ev.Proc, ev.Key)
			return
		}
		var p pointerBody
		if err := json.Unmarshal(ev.Body, &p); err != nil {
			c.w.Violation("%s wrote pointer %s that does not decode: %q", ev.Proc, ev.Key, ev.Body)
			return
		}
		prev := c.last[ev.Key]
		// A pointer is fenced against epoch e once a greater epoch
		// claimed it (Acquire claims both right after taking _writer).
		if e, ok := c.epochs[ev.Proc]; ok && e < prev.Epoch {
			c.w.Violation("fenced writer %s (epoch %d) moved %s, claimed by epoch %d, to %+v", ev.Proc, e, ev.Key, prev.Epoch, p)
		}
		if p.ID < prev.ID {
			c.w.Violation("pointer %s moved backwards: %q → %q (by %s)", ev.Key, prev.ID, p.ID, ev.Proc)
		}
		if p.Epoch < prev.Epoch {
			c.w.Violation("pointer %s went back to epoch %d from %d (by %s)", ev.Key, p.Epoch, prev.Epoch, ev.Proc)
		}
		c.last[ev.Key] = p
		if ev.Key == keyCompleted && p.ID != "" {
			c.named[p.ID] = true
			c.checkWholeLocked(ev.Proc, p.ID)
		}
	case strings.HasPrefix(ev.Key, pinsDir) && ev.Op != "delete":
		c.pins[ev.Key] = now
	case ev.Op == "delete" && strings.HasPrefix(ev.Key, jobPfx+"/") && !strings.HasPrefix(ev.Key, pinsDir):
		// Savepoints are the operator's, outside the writer role.
		if e, fenced := c.fencedLocked(ev.Proc, ev.Fault.Issued); fenced && !isSavepointKey(ev.Key) {
			c.w.Violation("fenced writer %s (epoch %d) deleted %s", ev.Proc, e, ev.Key)
		}
		c.checkPinsLocked(ev, now)
		c.checkRetentionLocked(ev)
		c.checkNamedFileLocked(ev)
	}
}

// checkPinsLocked fails a delete of an object a live pin protects, when
// the deleting process had seen the pin.
func (c *checker) checkPinsLocked(ev Event, now time.Time) {
	seen, ok := c.listedAt[ev.Proc]
	if !ok {
		return
	}
	for _, pin := range c.w.store.Keys(pinsDir) {
		at, ok := c.pins[pin]
		if !ok || !at.Before(seen) || now.Sub(at) >= c.w.pinLife() {
			continue
		}
		id, _, _ := strings.Cut(strings.TrimPrefix(pin, pinsDir), "/")
		if ev.Key == recordKey(id) {
			c.w.Violation("%s deleted the record of %s under a live pin %s", ev.Proc, id, pin)
			continue
		}
		body, ok := c.w.store.Object(recordKey(id))
		if !ok {
			continue
		}
		var rec blobstorage.Record
		if json.Unmarshal(body, &rec) != nil {
			continue
		}
		for _, files := range rec.Files {
			for _, f := range files {
				if jobPfx+"/"+f.Key == ev.Key {
					c.w.Violation("%s deleted %s of %s under a live pin %s", ev.Proc, ev.Key, id, pin)
				}
			}
		}
	}
}

// recordFiles returns the keys of the files id's record names, as they
// are in the store now (nil if it has no record that decodes).
func (c *checker) recordFiles(id string) []string {
	body, ok := c.w.store.Object(recordKey(id))
	if !ok {
		return nil
	}
	var rec blobstorage.Record
	if json.Unmarshal(body, &rec) != nil {
		return nil
	}
	var keys []string
	for _, files := range rec.Files {
		for _, f := range files {
			keys = append(keys, jobPfx+"/"+f.Key)
		}
	}
	return keys
}

// checkWholeLocked fails a move of _latest-completed to a checkpoint one
// of whose files is gone: it could not be restored (at once, rather than
// at the end of the run, when retention may have dropped it).
func (c *checker) checkWholeLocked(proc, id string) {
	for _, k := range c.recordFiles(id) {
		if _, ok := c.w.store.Object(k); !ok {
			c.w.Violation("%s moved _latest-completed to %s, whose file %s is gone", proc, id, k)
			return
		}
	}
}

// checkNamedFileLocked fails the delete of a file of a checkpoint
// retention keeps: the one _latest names, and the keep newest completed
// checkpoints a pointer has named, up to the one _latest-completed names,
// while their records are there. Such a checkpoint must stay whole
// whoever deletes and whatever the deleting run saw.
func (c *checker) checkNamedFileLocked(ev Event) {
	if strings.HasSuffix(ev.Key, "/checkpoint.json") {
		return // records: checkRetentionLocked
	}
	upTo := c.last[keyCompleted].ID
	var completed []string // named and completed, newest first
	keys := c.w.store.Keys(jobPfx + "/checkpoints/")
	for i := len(keys) - 1; i >= 0; i-- {
		id, rest, _ := strings.Cut(strings.TrimPrefix(keys[i], jobPfx+"/checkpoints/"), "/")
		if rest == "checkpoint.json" && c.named[id] && id <= upTo && len(completed) < keep {
			completed = append(completed, id)
		}
	}
	retained := completed
	if id := c.last[keyLatest].ID; id != "" && !slices.Contains(retained, id) {
		retained = append(retained, id)
	}
	for _, id := range retained {
		if slices.Contains(c.recordFiles(id), ev.Key) {
			c.w.Violation("%s deleted %s, a file of %s, which retention keeps (_latest-completed %s, _latest %s)", ev.Proc, ev.Key, id, upTo, c.last[keyLatest].ID)
			return
		}
	}
}

// checkRetentionLocked fails the delete of a completed checkpoint's
// record while fewer than keep completed checkpoints are newer.
func (c *checker) checkRetentionLocked(ev Event) {
	rest, ok := strings.CutPrefix(ev.Key, jobPfx+"/checkpoints/")
	if !ok || !strings.HasSuffix(rest, "/checkpoint.json") {
		return
	}
	id, _, _ := strings.Cut(rest, "/")
	if !c.named[id] {
		return
	}
	if c.last[keyCompleted].ID == id {
		c.w.Violation("%s deleted %s, the checkpoint _latest-completed names", ev.Proc, id)
		return
	}
	// Retention keeps the keep newest completed checkpoints up to the
	// one _latest-completed names.
	newer, upTo := 0, c.last[keyCompleted].ID
	for _, k := range c.w.store.Keys(jobPfx + "/checkpoints/") {
		n, rest, _ := strings.Cut(strings.TrimPrefix(k, jobPfx+"/checkpoints/"), "/")
		if rest != "checkpoint.json" || n <= id || n > upTo {
			continue
		}
		body, _ := c.w.store.Object(k)
		var rec blobstorage.Record
		if json.Unmarshal(body, &rec) == nil && rec.CheckpointData != nil && rec.Completed() {
			newer++
		}
	}
	if newer < keep {
		c.w.Violation("%s deleted completed checkpoint %s with only %d newer completed (keep %d)", ev.Proc, id, newer, keep)
	}
}

// staleSince reports whether a listing of id's pins was stale since t: a
// restore whose files GC deleted then may have had its pin hidden from
// GC by the store, which no protocol on listings can guard against.
func (c *checker) staleSince(id string, t time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	at, ok := c.stalePins[id]
	return ok && !at.Before(t)
}

// final runs the end-of-run checks, faultless: GC past every grace
// period, then every checkpoint ever named restorable, no orphans, and
// the job's output exactly once.
func (c *checker) final(ctx context.Context) {
	w := c.w
	time.Sleep(grace + pinTTL + time.Minute)
	ctx = WithProc(ctx, "final-gc")
	gc := blobstorage.New(w.job, filepath.Join(w.cfg.Dir, "final-gc"), blobstorage.Options{Keep: keep, Grace: grace, PinTTL: pinTTL, WriterName: "final-gc"})
	if _, err := gc.Acquire(ctx); err != nil {
		w.Violation("final GC: acquire: %v", err)
		return
	}
	w.checks.writerEpoch("final-gc", gc.Epoch())
	rep, err := gc.GC(ctx, blobstorage.GCOptions{})
	if err != nil {
		w.Violation("final GC: %v", err)
		return
	}
	w.sched.Note("final-gc", "retained %v, dropped %v, deleted %d objects", rep.Retained, rep.Dropped, rep.Objects)

	// Every completed checkpoint a pointer named, still there, restores.
	c.mu.Lock()
	var named []string
	for id := range c.named {
		named = append(named, id)
	}
	c.mu.Unlock()
	sort.Strings(named)
	ctx = WithProc(ctx, "check")
	chk := blobstorage.New(w.job, filepath.Join(w.cfg.Dir, "check"), blobstorage.Options{BufferedRestore: true, PinTTL: pinTTL})
	for _, id := range named {
		if _, ok := w.store.Object(recordKey(id)); !ok {
			continue // dropped by retention (checked when it was deleted)
		}
		c.restorable(ctx, chk, id)
	}

	// No orphans: what is left is what a kept checkpoint, a savepoint or
	// the store's own keys name.
	want := map[string]bool{keyWriter: true, keyLatest: true, keyCompleted: true, jobPfx + "/_tidemark": true}
	remote := 0 // objects of remote-mode state the retained records name
	for _, id := range rep.Retained {
		want[recordKey(id)] = true
		body, ok := w.store.Object(recordKey(id))
		if !ok {
			w.Violation("final GC retained %s, which has no record", id)
			continue
		}
		var rec blobstorage.Record
		if err := json.Unmarshal(body, &rec); err != nil {
			w.Violation("record of %s does not decode: %v", id, err)
			continue
		}
		for _, files := range rec.Files {
			for _, f := range files {
				want[jobPfx+"/"+f.Key] = true
			}
		}
		// A job spanning hosts: the part each owner's worker saved, which
		// the record's assignment names, stays with the record.
		for _, refs := range rec.Remote {
			for _, r := range refs {
				want[jobPfx+"/"+r.Key] = true
				remote++
			}
		}
		for owner, worker := range rec.Workers {
			want[fmt.Sprintf("%s/checkpoints/%s/parts/e%d/%s/%s/part.json", jobPfx, id, rec.Epoch, owner, worker)] = true
		}
	}
	for _, k := range w.store.Keys(jobPfx + "/") {
		if !want[k] && !isSavepointKey(k) {
			w.Violation("orphan after the final GC: %s", k)
		}
	}
	if w.cfg.RemoteState != "" {
		w.sched.Note("final-gc", "the retained checkpoints name %d remote objects", remote)
		if remote == 0 {
			w.Violation("remote mode: no retained checkpoint names a remote object: the mode went untested")
		}
	}
	if n := w.store.IncompleteUploads(jobPfx + "/"); n > 0 {
		w.Violation("%d incomplete uploads left after the final GC", n)
	}

	if w.cfg.Operator {
		c.finalReplica(ctx)
	}
	if w.cfg.Workers {
		c.workersExactlyOnce(ctx)
		return
	}
	if w.cfg.Runtime {
		c.jobExactlyOnce(ctx)
		return
	}
	c.exactlyOnce()
}

// restorable restores id with chk and checks its state against its record.
func (c *checker) restorable(ctx context.Context, chk *blobstorage.Storage, id string) {
	w := c.w
	cp, err := chk.LoadSpecific(ctx, id)
	if err != nil {
		w.Violation("checkpoint %s, once named by _latest-completed and still kept, does not load: %v", id, err)
		return
	}
	if err := chk.Restore(ctx, id); err != nil {
		w.Violation("checkpoint %s, once named by _latest-completed and still kept, does not restore: %v", id, err)
		return
	}
	w.checkRestored(w.job, chk.StateDir(id), cp, "checkpoint "+id)
	_ = os.RemoveAll(chk.StateDir(id))
}

// exactlyOnce checks that the committed output covers every input record
// exactly once.
func (c *checker) exactlyOnce() {
	w := c.w
	var batches []batch
	for _, k := range w.store.Keys(sinkPx + "/committed/") {
		body, _ := w.store.Object(k)
		var b batch
		if err := json.Unmarshal(body, &b); err != nil {
			w.Violation("committed output %s does not decode: %v", k, err)
			continue
		}
		batches = append(batches, b)
	}
	sort.Slice(batches, func(i, j int) bool { return batches[i].From < batches[j].From })
	next := 0
	for _, b := range batches {
		switch {
		case b.From < next:
			w.Violation("exactly-once: records %d..%d committed twice (again by %s)", b.From, min(next, b.To)-1, b.Txn)
		case b.From > next:
			w.Violation("exactly-once: records %d..%d never committed (next batch %s)", next, b.From-1, b.Txn)
		}
		next = max(next, b.To)
	}
	if next != w.cfg.Records {
		w.Violation("exactly-once: output ends at record %d of %d", next, w.cfg.Records)
	}
	c.committedRecords = next
}

func (c *checker) String() string { return fmt.Sprintf("checker(max epoch %d)", c.maxEpoch) }

// isSavepointKey reports whether key (in the job's prefix) is a
// savepoint's: its label or the savepoint area (package savepoint), the
// operator's, outside the writer role and GC.
func isSavepointKey(key string) bool {
	rest, ok := strings.CutPrefix(key, jobPfx+"/")
	return ok && savepoint.Class(rest) != ""
}
