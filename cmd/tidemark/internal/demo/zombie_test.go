package demo

import (
	"context"
	"errors"
	"maps"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore/memstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/cmd/tidemark/internal/demofault"
)

// These tests force the timings of the zombie scenario: node A is cut
// off, node B acquires the writer role (fencing A) and, since A never
// moved _latest to it, both use the same next checkpoint id.

// zombieDeltas is output no checkpoint of the job can produce: committed
// anywhere, it breaks the exactly-once check.
var zombieDeltas = map[string]uint64{"zombie-word": 1000}

func TestSinkCommitsOnlyItsOwnStagedOutputWhenAZombieStagesTheSameID(t *testing.T) {
	ctx := t.Context()
	b, bs := newFileSink(t)
	zombie := NewSink(bs)
	if err := b.Stage(ctx, id2, map[string]uint64{"a": 1}); err != nil {
		t.Fatal(err)
	}
	// The zombie stages the same id between B's stage and B's commit.
	if err := zombie.Stage(ctx, id2, zombieDeltas); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(ctx, id2); err != nil {
		t.Fatalf("B's commit: %v", err)
	}
	if out := output(t, b); !maps.Equal(out.Counts, map[string]uint64{"a": 1}) || out.Committed != 1 {
		t.Fatalf("committed output %+v, want exactly B's a=1", out)
	}
	// The zombie's late commit of the same id must not succeed either.
	if err := zombie.Commit(ctx, id2); err == nil {
		t.Fatal("zombie's commit of an id B committed succeeded")
	}
	if out := output(t, b); !maps.Equal(out.Counts, map[string]uint64{"a": 1}) {
		t.Fatalf("committed output after the zombie's commit %+v, want exactly B's a=1", out)
	}
}

func TestRunWorkersCommitsItsOwnOutputWhenAZombieStagesTheSameIDBeforeTheCommit(t *testing.T) {
	ctx := t.Context()
	bs := fileStore(t)
	zombie := NewSink(bs)
	b, _ := workersNode(t, bs, 2, nil)
	var (
		mu       sync.Mutex
		staged   string
		stageErr error
	)
	hook := func(s checkpoint.Step, id string) checkpoint.HookAction {
		mu.Lock()
		defer mu.Unlock()
		// After B persisted prepared (so after B staged), before B
		// commits: the zombie stages the very same id.
		if s == checkpoint.StepPersistPrepared && staged == "" && id >= checkpoint.NewID(3) {
			staged, stageErr = id, zombie.Stage(ctx, id, zombieDeltas)
		}
		return checkpoint.HookContinue
	}
	mustRunWorkers(t, demofault.With(t.Context(), demofault.Faults{Hook: hook}), b) // the exactly-once check: no zombie-word in the output
	mu.Lock()
	defer mu.Unlock()
	if staged == "" || stageErr != nil {
		t.Fatalf("the zombie did not stage (id %q, err %v): the test proves nothing", staged, stageErr)
	}
}

func TestRunWorkersSweepRemovesAZombiesStagedLeftoverOfACommittedID(t *testing.T) {
	ctx := t.Context()
	bs := fileStore(t)
	zombie := NewSink(bs)
	b, _ := workersNode(t, bs, 2, nil)
	hook := func(s checkpoint.Step, id string) checkpoint.HookAction {
		if s == checkpoint.StepPersistPrepared && id == checkpoint.NewID(3) {
			if err := zombie.Stage(ctx, id, zombieDeltas); err != nil {
				t.Error(err)
			}
		}
		return checkpoint.HookContinue
	}
	mustRunWorkers(t, demofault.With(t.Context(), demofault.Faults{Hook: hook}), b)
	out, err := NewSink(bs).Output(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if out.Staged != 1 {
		t.Fatalf("after B's run %+v: want the zombie's staged object left", out)
	}
	// The next run sweeps it, and it never becomes output.
	next, _ := workersNode(t, bs, 2, nil)
	mustRunWorkers(t, ctx, next)
	if out, err = NewSink(bs).Output(ctx); err != nil || out.Staged != 0 || out.Counts["zombie-word"] != 0 {
		t.Fatalf("after the next run %+v, %v: want nothing staged and no zombie output", out, err)
	}
}

// A zombie with a real, fenced BlobStorage fails to persist the same id
// B is about to commit; its Coordinator must not abort that id.
func TestRunWorkersCommitsWhenAFencedZombieFailsTheSameID(t *testing.T) {
	ctx := t.Context()
	bs := memstore.New()
	zombieStorage := blobstorage.New(bs, filepath.Join(t.TempDir(), "checkpoints"), blobstorage.Options{})
	if _, err := zombieStorage.Acquire(ctx); err != nil { // A was the writer; B's Run fences it
		t.Fatal(err)
	}
	zombieSink := NewSink(bs)
	b, _ := workersNode(t, bs, 2, nil)
	var (
		mu       sync.Mutex
		zombieID string
		fatal    error
		aborts   []string
	)
	hook := func(s checkpoint.Step, id string) checkpoint.HookAction {
		mu.Lock()
		defer mu.Unlock()
		if s != checkpoint.StepPersistPrepared || zombieID != "" || id < checkpoint.NewID(3) {
			return checkpoint.HookContinue
		}
		// Between B's prepared record and B's commit, the zombie runs
		// its own checkpoint of the same id to its failure.
		zombieID = id
		zc := checkpoint.NewCoordinator(zombieStorage, TxnID)
		zc.CommitSink = zombieSink.Commit
		zc.AbortSink = func(ctx context.Context, id string) error {
			aborts = append(aborts, id)
			return zombieSink.Abort(ctx, id)
		}
		zc.Start(ctx)
		zc.OnBarrierInjected(id, EncodeOffsets(Offsets{Records: b.Records, Words: b.Words}))
		zc.OnStateSnapshot(id, nil, nil)
		zc.OnSinkPrepared(id, zombieSink.Stage(ctx, id, zombieDeltas))
		select {
		case fatal = <-zc.Fatal():
		case <-time.After(10 * time.Second):
			t.Error("the zombie's coordinator never failed")
		}
		zc.Stop()
		return checkpoint.HookContinue
	}
	mustRunWorkers(t, demofault.With(t.Context(), demofault.Faults{Hook: hook}), b) // B commits the id, and the check holds
	mu.Lock()
	defer mu.Unlock()
	if zombieID == "" {
		t.Fatal("the zombie never ran: the test proves nothing")
	}
	if !errors.Is(fatal, checkpoint.ErrFenced) {
		t.Fatalf("zombie's fatal error %v, want ErrFenced", fatal)
	}
	if len(aborts) != 0 {
		t.Fatalf("fenced zombie aborted %q", aborts)
	}
}

func TestRunStopsWithAFencedMessageWhenAnotherNodeTakesOver(t *testing.T) {
	bs := memstore.New()
	zombie := node(t, bs)
	takeover := make(chan error, 1)
	zombie.Progress = func(p Progress) {
		// Once the zombie completed a checkpoint, another node takes the
		// writer role.
		if p.Event == "checkpoint" && p.Checkpoints == 1 {
			other := blobstorage.New(bs, filepath.Join(t.TempDir(), "checkpoints"), blobstorage.Options{})
			_, err := other.Acquire(t.Context())
			takeover <- err
		}
	}
	start := time.Now()
	res, err := Run(demofault.With(t.Context(), demofault.Faults{Slow: time.Millisecond}), zombie)
	if terr := <-takeover; terr != nil {
		t.Fatal(terr)
	}
	if !errors.Is(err, checkpoint.ErrFenced) || !strings.HasPrefix(err.Error(), "demo: fenced: another node took over") {
		t.Fatalf("zombie run: %v, want a fenced error saying another node took over", err)
	}
	t.Logf("zombie stopped at offset %d: %v", res.EndOffset, err)
	// Promptly: at its next checkpoint, not after reading the whole source.
	if res.EndOffset >= zombie.Records {
		t.Fatalf("zombie read to offset %d of %d after being fenced (in %s)", res.EndOffset, zombie.Records, time.Since(start))
	}
	// It aborted nothing: its open transaction is the new writer's to decide.
	out, err := NewSink(bs).Output(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if out.Aborted != 0 {
		t.Fatalf("fenced zombie left %d aborted transactions: %+v", out.Aborted, out)
	}
}

func TestCommittedRefusesOutputCommittedByAnotherWriterThanTheCheckpoints(t *testing.T) {
	ctx := t.Context()
	zombie, bs := newFileSink(t)
	b := NewSink(bs)
	if err := zombie.Stage(ctx, id2, zombieDeltas); err != nil {
		t.Fatal(err)
	}
	if err := zombie.Commit(ctx, id2); err != nil {
		t.Fatal(err)
	}
	// B's checkpoint id2 names B as its writer; the output of id2 is the
	// zombie's. Promoting B's checkpoint over it would break exactly-once.
	cp := &checkpoint.CheckpointData{ID: id2, TxnID: TxnIDOf(b.Writer())}
	if ok, err := b.Committed(ctx, cp); !errors.Is(err, ErrTxnOtherWriter) {
		t.Fatalf("Committed = %v, %v; want ErrTxnOtherWriter", ok, err)
	}
	// The checkpoint of the writer that did commit is committed.
	cp.TxnID = TxnIDOf(zombie.Writer())
	if ok, err := b.Committed(ctx, cp); err != nil || !ok {
		t.Fatalf("Committed(own writer) = %v, %v; want true", ok, err)
	}
	if err := b.Commit(ctx, id2); !errors.Is(err, ErrTxnOtherWriter) {
		t.Fatalf("B's commit of an id the zombie committed: %v, want ErrTxnOtherWriter", err)
	}
}

func TestSinkOutputRejectsABodyThatDoesNotMatchItsDigest(t *testing.T) {
	ctx := t.Context()
	s, bs := newFileSink(t)
	if err := s.Stage(ctx, id1, map[string]uint64{"a": 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, id1); err != nil {
		t.Fatal(err)
	}
	rc, err := bs.Get(ctx, OutPrefix+id1)
	if err != nil {
		t.Fatal(err)
	}
	body, err := readAllClose(rc)
	if err != nil {
		t.Fatal(err)
	}
	tampered := strings.Replace(string(body), "a\t1\n", "a\t2\n", 1)
	if tampered == string(body) {
		t.Fatalf("committed body %q: the test proves nothing", body)
	}
	if err := bs.Put(ctx, OutPrefix+id1, stringsReader(tampered)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Output(ctx); !errors.Is(err, ErrCorruptOutput) {
		t.Fatalf("Output over a tampered commit: %v, want ErrCorruptOutput", err)
	}
}
