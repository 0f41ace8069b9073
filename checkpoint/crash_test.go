package checkpoint

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
)

// The crash-window tests run a small pipeline — a deterministic source, a
// stateful operator (running sum) with a native state directory, and a
// transactional sink — through several coordinated checkpoints, inject a
// failure (HookFail) or a crash (HookHalt) after one protocol step, then
// recover like a restarted process: sweep orphans, Recover with the
// broker's knowledge of which transactions committed, fence the old
// producer (abort its open transactions) and replay from the restored
// offsets and state. The committed output must then be exactly the output
// of a run without faults.

// broker is a transactional output log, like a Kafka topic with a
// transactional producer: writes are staged per transaction (named by
// checkpoint id) and become visible only on commit. An aborted name may be
// staged into again by a later run: a checkpoint id that never got a
// record is reused after recovery, and its old transaction is gone. A
// committed name never is (the protocol persists a record before any
// commit, so recovery moves the next id past it).
type broker struct {
	mu        sync.Mutex
	open      map[string][]string
	committed map[string]bool
	aborted   map[string]bool
	output    []string // visible output, in commit order
}

func newBroker() *broker {
	return &broker{open: map[string][]string{}, committed: map[string]bool{}, aborted: map[string]bool{}}
}

func (b *broker) stage(txn, rec string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.open[txn] = append(b.open[txn], rec)
}

func (b *broker) commit(_ context.Context, txn string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.committed[txn] {
		return fmt.Errorf("commit %s: already committed", txn)
	}
	b.output = append(b.output, b.open[txn]...)
	delete(b.open, txn)
	b.committed[txn] = true
	return nil
}

func (b *broker) abort(_ context.Context, txn string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.committed[txn] {
		return fmt.Errorf("abort %s: already committed", txn)
	}
	delete(b.open, txn)
	b.aborted[txn] = true
	return nil
}

// fence aborts every open transaction, as a new producer with the same
// transactional id does when it starts.
func (b *broker) fence() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for txn := range b.open {
		b.aborted[txn] = true
		delete(b.open, txn)
	}
}

func (b *broker) isCommitted(_ context.Context, cp *CheckpointData) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.committed[cp.ID], nil
}

func (b *broker) snapshot() (output []string, committed, aborted, open map[string]bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	committed, aborted, open = map[string]bool{}, map[string]bool{}, map[string]bool{}
	for k := range b.committed {
		committed[k] = true
	}
	for k := range b.aborted {
		aborted[k] = true
	}
	for k := range b.open {
		open[k] = true
	}
	return slices.Clone(b.output), committed, aborted, open
}

// offsetCommitter is the source's external offset store (advisory).
type offsetCommitter struct {
	mu   sync.Mutex
	last int
}

func (o *offsetCommitter) commit(_ context.Context, off []byte) error {
	n, err := strconv.Atoi(string(off))
	if err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.last = max(o.last, n)
	return nil
}

const (
	pipelineRecords = 47 // source records 0..46
	barrierEvery    = 10 // a checkpoint every 10 records, and one at the end
	opOwner         = "op"
)

// expectedOutput is what the sink must have committed after a full run:
// one line per record with the running sum, exactly once.
func expectedOutput() []string {
	var out []string
	sum := 0
	for i := range pipelineRecords {
		sum += i
		out = append(out, fmt.Sprintf("%d:%d", i, sum))
	}
	return out
}

// runStart is where a pipeline run starts: source position, operator
// state, and the id of the first checkpoint it takes.
type runStart struct {
	next    int
	sum     int
	firstID string
}

type msg struct {
	rec     int
	out     string
	barrier string // non-empty: a checkpoint barrier
}

// runPipeline runs the pipeline from start until its final checkpoint
// completes, or until the coordinator fails or halts; then it cancels the
// pipeline, like a process that dies.
func runPipeline(t *testing.T, s *FileStorage, b *broker, oc *offsetCommitter, start runStart, hook func(Step, string) HookAction) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	halted := make(chan struct{})
	var haltOnce sync.Once
	completed := make(chan string, 16)

	c := NewCoordinator(s, "tidemark-test")
	c.CommitSink = b.commit
	c.AbortSink = b.abort
	c.CommitOffsets = oc.commit
	c.OnCompleted = func(id string) { completed <- id }
	if hook != nil {
		c.Hook = func(step Step, id string) HookAction {
			a := hook(step, id)
			if a == HookHalt {
				haltOnce.Do(func() { close(halted) })
			}
			return a
		}
	}
	c.Start(ctx)

	// Barrier ids are known in advance: the checkpoints this run takes.
	var ids []string
	id := start.firstID
	for n := start.next; n < pipelineRecords; n += barrierEvery {
		ids = append(ids, id)
		id, _ = NextID(id)
	}
	if len(ids) == 0 {
		c.Stop()
		return
	}
	finalID := ids[len(ids)-1]

	toOp, toSink := make(chan msg), make(chan msg)
	send := func(ch chan<- msg, m msg) bool {
		select {
		case ch <- m:
			return true
		case <-ctx.Done():
			return false
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() { // source
		defer close(toOp)
		k := 0
		for i := start.next; i < pipelineRecords; i++ {
			if !send(toOp, msg{rec: i}) {
				return
			}
			if (i-start.next+1)%barrierEvery == 0 || i == pipelineRecords-1 {
				bid := ids[k]
				k++
				c.OnBarrierInjected(bid, []byte(strconv.Itoa(i+1)))
				if !send(toOp, msg{barrier: bid}) {
					return
				}
			}
		}
	})
	wg.Go(func() { // stateful operator
		defer close(toSink)
		sum := start.sum
		for m := range toOp {
			if m.barrier != "" {
				dir := filepath.Join(s.StateDir(m.barrier), opOwner)
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Error(err)
					return
				}
				if err := os.WriteFile(filepath.Join(dir, "sum"), []byte(strconv.Itoa(sum)), 0o644); err != nil {
					t.Error(err)
					return
				}
				c.OnStateSnapshot(m.barrier, map[string][]byte{"sum": []byte(strconv.Itoa(sum))}, map[string]string{opOwner: opOwner})
				if !send(toSink, m) {
					return
				}
				continue
			}
			sum += m.rec
			if !send(toSink, msg{out: fmt.Sprintf("%d:%d", m.rec, sum)}) {
				return
			}
		}
	})
	wg.Go(func() { // transactional sink
		txn := start.firstID
		for m := range toSink {
			if m.barrier != "" {
				if m.barrier != txn {
					t.Errorf("sink: barrier %s while staging into %s", m.barrier, txn)
				}
				c.OnSinkPrepared(m.barrier, nil)
				txn, _ = NextID(m.barrier)
				continue
			}
			b.stage(txn, m.out)
		}
	})

	// Wait for the end of the run, whichever way it ends.
	func() {
		for {
			select {
			case id := <-completed:
				if id == finalID {
					return
				}
			case err := <-c.Fatal():
				t.Logf("coordinator failed: %v", err)
				return
			case <-halted:
				return
			}
		}
	}()
	cancel()
	wg.Wait()
	c.Stop()
}

// recoverPipeline recovers like a restarted process and returns the
// decision and where the next run starts.
func recoverPipeline(t *testing.T, s *FileStorage, b *broker) (Decision, runStart) {
	t.Helper()
	if err := s.SweepOrphans(ctx); err != nil {
		t.Fatal(err)
	}
	d, err := Recover(ctx, s, b.isCommitted)
	if err != nil {
		t.Fatalf("Recover: %v", err)
	}
	b.fence()
	start := runStart{firstID: NewID(1)}
	if d.Latest != nil {
		start.firstID, err = NextID(d.Latest.ID)
		if err != nil {
			t.Fatal(err)
		}
	}
	if cp := d.Checkpoint; cp != nil {
		if start.next, err = strconv.Atoi(string(cp.Offsets())); err != nil {
			t.Fatalf("offsets of %s: %v", cp.ID, err)
		}
		if start.sum, err = strconv.Atoi(string(cp.Operators["sum"])); err != nil {
			t.Fatalf("state of %s: %v", cp.ID, err)
		}
		// The native state directory must agree with the record.
		native, err := os.ReadFile(filepath.Join(s.StateDir(cp.ID), cp.StateDirs[opOwner], "sum"))
		if err != nil || string(native) != string(cp.Operators["sum"]) {
			t.Fatalf("state dir of %s = %q, %v; record says %q", cp.ID, native, err, cp.Operators["sum"])
		}
	}
	return d, start
}

func TestPipelineWithoutFaultsIsExactlyOnce(t *testing.T) {
	s, b, oc := NewFileStorage(t.TempDir()), newBroker(), &offsetCommitter{}
	runPipeline(t, s, b, oc, runStart{firstID: NewID(1)}, nil)
	out, committed, _, open := b.snapshot()
	if !slices.Equal(out, expectedOutput()) {
		t.Fatalf("output:\n got %q\nwant %q", out, expectedOutput())
	}
	if len(committed) != 5 || len(open) != 0 {
		t.Fatalf("committed %v, open %v; want 5 committed, none open", committed, open)
	}
	d, _ := recoverPipeline(t, s, b)
	if d.Action != ActionRestore || idOf(d.Checkpoint) != NewID(5) {
		t.Fatalf("recovery after a clean run = %v %s", d.Action, idOf(d.Checkpoint))
	}
	if oc.last != pipelineRecords {
		t.Fatalf("committed offset %d, want %d", oc.last, pipelineRecords)
	}
}

// TestCrashWindows injects HookFail and HookHalt after every protocol step
// of one checkpoint and checks what recovery restores and that replaying
// from it yields exactly-once output.
func TestCrashWindows(t *testing.T) {
	type want struct {
		action   Action
		restored string // "" for a fresh start
	}
	cases := []struct {
		step   Step
		target string
		want   want
	}{
		// Before the sink commit the output of the target is not visible:
		// fall back to the previous checkpoint and produce it again.
		{StepPersistPrepared, NewID(3), want{ActionRestore, NewID(2)}},
		{StepPersistPrepared, NewID(1), want{ActionStartFresh, ""}},
		// After the commit and before the promotion: the output is visible,
		// so the prepared checkpoint must be promoted, not replayed.
		{StepSinkCommitted, NewID(3), want{ActionPromote, NewID(3)}},
		{StepSinkCommitted, NewID(1), want{ActionPromote, NewID(1)}},
		// After the promotion: restore it.
		{StepPersistCompleted, NewID(3), want{ActionRestore, NewID(3)}},
		{StepOffsetsCommitted, NewID(3), want{ActionRestore, NewID(3)}},
		{StepOffsetsCommitted, NewID(5), want{ActionRestore, NewID(5)}},
	}
	for _, c := range cases {
		for _, action := range []HookAction{HookFail, HookHalt} {
			t.Run(fmt.Sprintf("%s/%s/%s", c.step, action, c.target), func(t *testing.T) {
				s, b, oc := NewFileStorage(t.TempDir()), newBroker(), &offsetCommitter{}
				fired := 0
				runPipeline(t, s, b, oc, runStart{firstID: NewID(1)}, func(step Step, id string) HookAction {
					if step == c.step && id == c.target {
						fired++
						return action
					}
					return HookContinue
				})
				if fired != 1 {
					t.Fatalf("hook fired %d times at the target", fired)
				}

				// The crash itself: a failure before the commit aborts the
				// target's transaction; a halt leaves it open.
				_, committed, aborted, open := b.snapshot()
				if c.step == StepPersistPrepared {
					if action == HookFail && !aborted[c.target] {
						t.Errorf("HookFail before commit did not abort %s", c.target)
					}
					if action == HookHalt && !open[c.target] {
						t.Errorf("HookHalt before commit did not leave %s open", c.target)
					}
				} else if !committed[c.target] {
					t.Errorf("%s not committed after %s", c.target, c.step)
				}

				d, start := recoverPipeline(t, s, b)
				if d.Action != c.want.action || idOf(d.Checkpoint) != idOf(cpOrNil(c.want.restored)) {
					t.Fatalf("recovery = %v %s, want %v %s", d.Action, idOf(d.Checkpoint), c.want.action, c.want.restored)
				}
				if lc, _ := s.LoadLatestCompleted(ctx); idOf(lc) != idOf(d.Checkpoint) {
					t.Errorf("latest completed after recovery = %s, want %s", idOf(lc), idOf(d.Checkpoint))
				}

				// The sink agrees with the chosen checkpoint: every
				// transaction up to it committed, every later one aborted.
				_, committed, aborted, open = b.snapshot()
				if len(open) != 0 {
					t.Errorf("transactions still open after fencing: %v", open)
				}
				for n := uint64(1); n <= 5; n++ {
					id := NewID(n)
					if !committed[id] && !aborted[id] {
						continue // never reached the sink
					}
					if wantCommitted := c.want.restored != "" && id <= c.want.restored; committed[id] != wantCommitted {
						t.Errorf("txn %s committed = %v, want %v", id, committed[id], wantCommitted)
					}
				}
				// External offsets never run ahead of what is restored.
				if oc.last > start.next {
					t.Errorf("offsets committed up to %d, restored position %d", oc.last, start.next)
				}
				// Orphan state of checkpoints never persisted is gone.
				for n := uint64(1); n <= 5; n++ {
					id := NewID(n)
					if _, err := s.LoadSpecific(ctx, id); err == nil {
						continue
					}
					if _, err := os.Stat(s.StateDir(id)); !os.IsNotExist(err) {
						t.Errorf("orphan state of %s survived the sweep", id)
					}
				}

				// Replay: the new run must not reuse the id of anything
				// the old one persisted, and must finish the output
				// exactly once.
				if d.Latest != nil && start.firstID <= d.Latest.ID {
					t.Fatalf("next id %s does not follow latest %s", start.firstID, d.Latest.ID)
				}
				runPipeline(t, s, b, oc, start, nil)
				out, _, _, _ := b.snapshot()
				if !slices.Equal(out, expectedOutput()) {
					t.Fatalf("output after recovery:\n got %q\nwant %q", out, expectedOutput())
				}
				if oc.last != pipelineRecords {
					t.Errorf("final committed offset %d, want %d", oc.last, pipelineRecords)
				}
			})
		}
	}
}

func cpOrNil(id string) *CheckpointData {
	if id == "" {
		return nil
	}
	return &CheckpointData{ID: id}
}
