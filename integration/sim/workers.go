package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/job"
	pstate "github.com/tidemark-io/tidemark/state"
)

// The workers mode (Config.Workers): a job spanning hosts. A coordinator
// (job.RunCoordinator, replaced by a standby when it dies or freezes)
// and one worker per slot (job.RunWorker, replaced on another disk or
// its predecessor's) reach each other through the simulation's Group.
// Slot i of K reads the numbers i, i+K, i+2K… and keeps their running
// total in its own state owner; each slot writes to its own BlobSink.

const (
	workerInterval = 300 * time.Millisecond // between barriers
	workerTimeout  = 5 * time.Second        // a barrier's wait for every report
	sourcePause    = 100 * time.Millisecond // a batch takes this long to arrive
)

func slotOwner(slot string) string { return "sum-" + slot }

// slotNumbers is slot i of k's replayable part of 0…n-1, one batch per
// pause. Its offsets are a JSON object keyed by the slot (a partition).
type slotNumbers struct {
	slot    string
	i, k, n int
	next    int // the next number to read
	pause   time.Duration
}

func (s *slotNumbers) Seek(_ context.Context, off []byte) error {
	s.next = s.i
	if off == nil {
		return nil
	}
	var m map[string]int
	if err := json.Unmarshal(off, &m); err != nil {
		return fmt.Errorf("sim: offsets %q: %w", off, err)
	}
	if n, ok := m[s.slot]; ok {
		s.next = n
	}
	return nil
}

func (s *slotNumbers) Next(ctx context.Context) ([]job.Record, error) {
	if s.next >= s.n {
		return nil, io.EOF
	}
	t := time.NewTimer(s.pause)
	select {
	case <-ctx.Done():
		t.Stop()
		return nil, ctx.Err()
	case <-t.C:
	}
	var out []job.Record
	for range 1 + (s.next/s.k)%3 {
		if s.next >= s.n {
			break
		}
		out = append(out, job.Record{Key: []byte(strconv.Itoa(s.next))})
		s.next += s.k
	}
	return out, nil
}

func (s *slotNumbers) Offsets() ([]byte, error) { return json.Marshal(map[string]int{s.slot: s.next}) }

// slotTotal is the sum of slot i of k's numbers below next.
func slotTotal(i, k, next int) int {
	t := 0
	for m := i; m < next; m += k {
		t += m
	}
	return t
}

func (w *World) slotSink(slot string) *job.BlobSink {
	return job.NewBlobSink(w.sinkBS, outPfx+slot+"/")
}

func (w *World) slotIndex(slot string) int {
	for i, s := range w.slots {
		if s == slot {
			return i
		}
	}
	return -1
}

func (w *World) workerConfig(g job.Group, slot, dir string, observe func(job.Event)) job.WorkerConfig {
	i := w.slotIndex(slot)
	return job.WorkerConfig{
		Group: g, Slot: slot, Blobstore: w.job, Dir: dir,
		Source: func(context.Context) (job.Source, error) {
			return &slotNumbers{slot: slot, i: i, k: len(w.slots), n: w.cfg.Records, pause: sourcePause}, nil
		},
		Processor: summer{owner: slotOwner(slot)},
		Sink:      w.slotSink(slot),
		Owners:    []string{slotOwner(slot)},
		// No flush at a checkpoint: Pebble's flushes and compactions run
		// on goroutines of their own, racing the worker for file numbers,
		// which the trace's keys would show. A checkpoint carries its WAL.
		State:   pstate.Options{NoFlushOnCheckpoint: true},
		Options: blobstorage.Options{Concurrency: 3, Keep: keep, Grace: grace, PinTTL: pinTTL},
		Observe: observe,
	}
}

func (w *World) coordinatorConfig(st *blobstorage.Storage, observe func(job.Event)) job.CoordinatorConfig {
	return job.CoordinatorConfig{
		Group: w.group.Handle(), Storage: st, Slots: w.slots,
		Sink:     func(slot string) (job.Sink, error) { return w.slotSink(slot), nil },
		Interval: workerInterval, Timeout: workerTimeout, GCEvery: 3,
		Observe: observe,
	}
}

// noteEvents returns an Observe that puts a process's events but its
// batches in the trace.
func (w *World) noteEvents(name string) func(job.Event) {
	return func(ev job.Event) {
		if ev.Kind != "batch" {
			w.sched.Note(name, "%s %s (%d records)", ev.Kind, ev.Checkpoint, ev.Records)
		}
	}
}

// startCoordinator starts the next coordinator: the standby that takes
// over from the one that died, froze or was fenced.
func (w *World) startCoordinator() {
	w.mu.Lock()
	if w.started >= w.cfg.MaxWriters || w.finished {
		w.mu.Unlock()
		return
	}
	w.started++
	name := fmt.Sprintf("c%d", w.started)
	w.current = name
	seed := w.rng.Uint64()
	w.mu.Unlock()
	w.sched.Note(name, "starts (coordinator)")
	w.spawn(name, false, func(ctx context.Context, p *proc) {
		rng := rand.New(rand.NewPCG(seed, 1))
		st := blobstorage.New(w.job, p.dir, blobstorage.Options{
			Concurrency: 3, Keep: keep, Grace: grace, PinTTL: pinTTL, WriterName: p.name,
		})
		var err error
		for attempt := 1; ; attempt++ {
			var res job.Result
			// Each attempt's own context ends its watches of the Group.
			actx, cancel := context.WithCancel(ctx)
			res, err = job.RunCoordinator(actx, w.coordinatorConfig(st, w.noteEvents(name)))
			cancel()
			if e := st.Epoch(); e != 0 {
				w.checks.writerEpoch(name, e)
			}
			w.sched.Note(name, "RunCoordinator: %s %s, %d checkpoints: %v", res.Action, res.Restored, res.Checkpoints, err)
			if err == nil {
				w.mu.Lock()
				w.finished = true
				w.mu.Unlock()
			}
			if err == nil || ctx.Err() != nil || errors.Is(err, checkpoint.ErrFenced) || attempt >= 50 || !w.sleep(ctx, rng) {
				break
			}
		}
		w.mu.Lock()
		cur := w.current == name
		w.mu.Unlock()
		if err != nil && cur && ctx.Err() == nil {
			w.restartReq <- name
		}
	})
}

// sleep backs off before a process retries, false if ctx ends first.
func (w *World) sleep(ctx context.Context, rng *rand.Rand) bool {
	t := time.NewTimer(time.Duration(500+rng.IntN(2000)) * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// startWorker starts slot's next worker: on its predecessor's disk, if
// that process has ended, or on an empty one.
func (w *World) startWorker(slot string) {
	w.mu.Lock()
	if w.workerStarts >= w.cfg.MaxWriters*len(w.slots) || w.finished {
		w.mu.Unlock()
		return
	}
	w.workerStarts++
	name := fmt.Sprintf("w%s-%d", slot, w.workerStarts)
	if prev := w.slotProc[slot]; prev != "" {
		delete(w.holder, prev)
	}
	w.slotProc[slot], w.holder[name] = name, slot
	dir := w.slotDir[slot]
	if dir == "" || !w.dirFree[dir] || w.rng.IntN(2) == 0 {
		dir = filepath.Join(w.cfg.Dir, name)
	}
	w.dirFree[dir] = false
	w.slotDir[slot] = dir
	seed := w.rng.Uint64()
	w.mu.Unlock()
	w.sched.Note(name, "starts (worker of slot %s) in %s", slot, filepath.Base(dir))
	w.spawn(name, false, func(ctx context.Context, p *proc) {
		rng := rand.New(rand.NewPCG(seed, 1))
		var err error
		for attempt := 1; ; attempt++ {
			var res job.Result
			actx, cancel := context.WithCancel(ctx)
			res, err = job.RunWorker(actx, w.workerConfig(w.group.Handle(), slot, dir, w.noteEvents(name)))
			cancel()
			w.sched.Note(name, "RunWorker: restored %s, %d parts, %d records: %v", res.Restored, res.Checkpoints, res.Records, err)
			if err == nil || ctx.Err() != nil || errors.Is(err, job.ErrReplaced) || attempt >= 50 || !w.sleep(ctx, rng) {
				break
			}
		}
		w.mu.Lock()
		w.dirFree[dir] = true
		cur := w.holder[name] != ""
		w.mu.Unlock()
		if err != nil && cur && ctx.Err() == nil {
			w.restartReq <- name
		}
	})
}

// isCurrentLocked reports whether name is the process the world counts
// on: the writer, the coordinator, or a slot's worker.
func (w *World) isCurrentLocked(name string) bool {
	return w.current == name || w.holder[name] != ""
}

// restart replaces name, which died, froze or failed.
func (w *World) restart(name string) {
	w.mu.Lock()
	slot := w.holder[name]
	w.mu.Unlock()
	if slot != "" {
		w.startWorker(slot)
		return
	}
	w.startWriter()
}

// finalWorkers finishes the job faultless: a coordinator and a worker
// per slot, each on a new disk.
func (w *World) finalWorkers(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for i, slot := range w.slots {
		name := "final-" + slot
		wg.Add(1)
		go func() {
			defer wg.Done()
			// One at a time: each draws its incarnation id from
			// crypto/rand, in the order they start.
			time.Sleep(time.Duration(i+1) * time.Millisecond)
			g := w.group.Handle()
			res, err := job.RunWorker(WithProc(ctx, name), w.workerConfig(g, slot, filepath.Join(w.cfg.Dir, name), w.noteEvents(name)))
			w.sched.Note(name, "RunWorker: restored %s, %d parts, %d records: %v", res.Restored, res.Checkpoints, res.Records, err)
		}()
	}
	name := "final-c"
	st := blobstorage.New(w.job, filepath.Join(w.cfg.Dir, name), blobstorage.Options{
		Concurrency: 3, Keep: keep, Grace: grace, PinTTL: pinTTL, WriterName: name,
	})
	res, err := job.RunCoordinator(WithProc(ctx, name), w.coordinatorConfig(st, w.noteEvents(name)))
	if e := st.Epoch(); e != 0 {
		w.checks.writerEpoch(name, e)
	}
	w.sched.Note(name, "RunCoordinator: %s %s, %d checkpoints: %v", res.Action, res.Restored, res.Checkpoints, err)
	// The workers return on the plan that stops the job.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTimer(10 * time.Minute)
	select {
	case <-done:
	case <-t.C:
		if err == nil {
			err = errors.New("the final workers did not stop within 10 minutes of the job's end")
		}
	}
	t.Stop()
	cancel()
	<-done
	w.wg.Wait() // the Group's deliveries
	return err
}

// checkSlotsState opens the state restored into dir (every slot's owner)
// and checks each slot's total against the record's offsets.
func (w *World) checkSlotsState(dir string, cp *checkpoint.CheckpointData, what string) {
	var offsets map[string]map[string]int
	if err := json.Unmarshal(cp.Offsets(), &offsets); err != nil {
		w.Violation("%s: offsets %q: %v", what, cp.Offsets(), err)
		return
	}
	work, err := os.MkdirTemp(w.cfg.Dir, "open-")
	if err != nil {
		w.Violation("%s: %v", what, err)
		return
	}
	defer os.RemoveAll(work)
	st, err := pstate.OpenCheckpoint(context.Background(), dir, filepath.Join(work, "live"), pstate.Options{})
	if err != nil {
		w.Violation("%s: the restored state does not open: %v", what, err)
		return
	}
	defer st.Close()
	for _, slot := range w.slots {
		off, ok := offsets[slot]
		if !ok {
			w.Violation("%s: no offsets for slot %s: %q", what, slot, cp.Offsets())
			continue
		}
		next, ok := off[slot]
		if !ok {
			next = w.slotIndex(slot)
		}
		o, err := st.Owner(slotOwner(slot))
		if err != nil {
			w.Violation("%s: %v", what, err)
			continue
		}
		v, _, err := o.Get([]byte("total"))
		total, _ := strconv.Atoi(string(v))
		if want := slotTotal(w.slotIndex(slot), len(w.slots), next); err != nil || total != want {
			w.Violation("%s: slot %s's total is %d (%v), its offset %d says %d", what, slot, total, err, next, want)
		}
	}
}

// workersExactlyOnce checks every slot's committed output: each of its
// numbers once, each with the slot's total up to it.
func (c *checker) workersExactlyOnce(ctx context.Context) {
	w := c.w
	seen := make([]int, w.cfg.Records)
	k := len(w.slots)
	for i, slot := range w.slots {
		for r, err := range w.slotSink(slot).Output(ctx) {
			if err != nil {
				w.Violation("exactly-once: reading slot %s's output: %v", slot, err)
				return
			}
			n, err := strconv.Atoi(string(r.Key))
			if err != nil || n < 0 || n >= w.cfg.Records || n%k != i {
				w.Violation("exactly-once: slot %s's output record %q is not its input", slot, r.Key)
				continue
			}
			seen[n]++
			if total, _ := strconv.Atoi(string(r.Value)); total != slotTotal(i, k, n+1) {
				w.Violation("exactly-once: record %d committed with total %s, want %d (slot %s's state counted a record twice or not at all)", n, r.Value, slotTotal(i, k, n+1), slot)
			}
		}
	}
	for n, m := range seen {
		switch {
		case m == 0:
			w.Violation("exactly-once: record %d never committed", n)
		case m > 1:
			w.Violation("exactly-once: record %d committed %d times", n, m)
		}
	}
	c.committedRecords = w.cfg.Records
}
