package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// callLog records the coordinator's calls in order.
type callLog struct {
	mu    sync.Mutex
	calls []string
}

func (l *callLog) add(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, fmt.Sprintf(format, args...))
}

func (l *callLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

// coordFixture is a coordinator over faultyStorage with every callback
// logged.
type coordFixture struct {
	c         *Coordinator
	s         *FileStorage
	fs        *faultyStorage
	log       *callLog
	completed chan string
}

func newCoordFixture(t *testing.T) *coordFixture {
	t.Helper()
	f := &coordFixture{s: NewFileStorage(t.TempDir()), log: &callLog{}, completed: make(chan string, 16)}
	f.fs = &faultyStorage{Storage: f.s}
	c := NewCoordinator(f.fs, "txn-1")
	c.CommitSink = func(_ context.Context, id string) error { f.log.add("commit %s", id); return nil }
	c.AbortSink = func(_ context.Context, id string) error { f.log.add("abort %s", id); return nil }
	c.CommitOffsets = func(_ context.Context, off []byte) error { f.log.add("offsets %s", off); return nil }
	c.OnCompleted = func(id string) { f.log.add("completed %s", id); f.completed <- id }
	f.c = c
	t.Cleanup(c.Stop)
	return f
}

// feed delivers the three inputs of checkpoint id.
func feed(c *Coordinator, id string) {
	c.OnBarrierInjected(id, []byte("off-"+id))
	c.OnStateSnapshot(id, map[string][]byte{"0": []byte("op-" + id)}, map[string]string{"w0": "w0"})
	c.OnSinkPrepared(id, nil)
}

func TestCoordinatorFinalizesWhenInputsArriveInAnyOrder(t *testing.T) {
	orders := [][]string{
		{"barrier", "state", "sink"}, {"barrier", "sink", "state"}, {"state", "barrier", "sink"},
		{"state", "sink", "barrier"}, {"sink", "barrier", "state"}, {"sink", "state", "barrier"},
	}
	for _, order := range orders {
		t.Run(strings.Join(order, "-"), func(t *testing.T) {
			f := newCoordFixture(t)
			f.c.Start(ctx)
			id := NewID(1)
			for _, ev := range order {
				switch ev {
				case "barrier":
					f.c.OnBarrierInjected(id, []byte("off-1"))
				case "state":
					f.c.OnStateSnapshot(id, map[string][]byte{"0": []byte("s")}, map[string]string{"w0": "w0"})
				case "sink":
					f.c.OnSinkPrepared(id, nil)
				}
			}
			waitFor(t, f.completed, "completion")
			f.c.Stop()
			got, err := f.s.LoadLatestCompleted(ctx)
			if err != nil || got == nil {
				t.Fatalf("LoadLatestCompleted = %v, %v", got, err)
			}
			if string(got.Offsets()) != "off-1" || string(got.Operators["0"]) != "s" || got.StateDirs["w0"] != "w0" || got.TxnID != "txn-1" {
				t.Fatalf("record = %+v", got)
			}
		})
	}
}

func TestCoordinatorRunsTheProtocolInOrder(t *testing.T) {
	f := newCoordFixture(t)
	var steps []string
	f.c.Hook = func(s Step, id string) HookAction {
		// Each hook sees the storage in the state its step promises.
		d, err := f.s.LoadSpecific(ctx, id)
		if err != nil {
			t.Errorf("%s: record missing: %v", s, err)
		} else if wantDone := s == StepPersistCompleted || s == StepOffsetsCommitted; d.Completed() != wantDone {
			t.Errorf("%s: status %q", s, d.Status)
		}
		f.log.add("hook %s", s)
		steps = append(steps, string(s))
		return HookContinue
	}
	f.c.Start(ctx)
	feed(f.c, NewID(1))
	feed(f.c, NewID(2))
	f.c.Stop()
	want := []string{}
	for _, id := range []string{NewID(1), NewID(2)} {
		want = append(want,
			"hook persist-prepared", "commit "+id, "hook sink-committed", "hook persist-completed",
			"completed "+id, "offsets off-"+id, "hook offsets-committed")
	}
	if got := f.log.get(); !slices.Equal(got, want) {
		t.Fatalf("calls:\n got %q\nwant %q", got, want)
	}
}

func TestCoordinatorNeverFinalizesOnTheSinkGoroutine(t *testing.T) {
	f := newCoordFixture(t)
	release := make(chan struct{})
	f.c.CommitSink = func(context.Context, string) error {
		<-release // a real sink commit waits for the sink goroutine
		return nil
	}
	f.c.Start(ctx)
	f.c.OnBarrierInjected(NewID(1), nil)
	f.c.OnStateSnapshot(NewID(1), nil, nil)
	returned := make(chan struct{})
	go func() {
		f.c.OnSinkPrepared(NewID(1), nil) // would deadlock if it finalized inline
		close(returned)
	}()
	waitFor(t, returned, "OnSinkPrepared to return while CommitSink is blocked")
	close(release)
	waitFor(t, f.completed, "completion")
}

// failCheckpoint runs checkpoint 1 on a new fixture, changed first by
// setup (if not nil), with sinkErr as the sink's prepare result; it
// requires the coordinator to report a fatal error that is want, stops
// the coordinator and returns the fixture and the checkpoint id.
func failCheckpoint(t *testing.T, setup func(*coordFixture), sinkErr, want error) (*coordFixture, string) {
	t.Helper()
	f := newCoordFixture(t)
	if setup != nil {
		setup(f)
	}
	f.c.Start(ctx)
	id := NewID(1)
	f.c.OnBarrierInjected(id, []byte("o"))
	f.c.OnStateSnapshot(id, nil, nil)
	f.c.OnSinkPrepared(id, sinkErr)
	f.stopOnFatal(t, want)
	return f, id
}

// stopOnFatal waits for the coordinator's fatal error, requires it to be
// want and stops the coordinator.
func (f *coordFixture) stopOnFatal(t *testing.T, want error) {
	t.Helper()
	if err := waitFor(t, f.c.Fatal(), "fatal error"); !errors.Is(err, want) {
		t.Fatalf("fatal = %v, want %v", err, want)
	}
	f.c.Stop()
}

// checkRecordStatus checks the stored record of checkpoint id: absent if
// want is "", else of status want.
func (f *coordFixture) checkRecordStatus(t *testing.T, id string, want Status) {
	t.Helper()
	d, _ := f.s.LoadSpecific(ctx, id)
	switch {
	case want == "" && d != nil:
		t.Errorf("record written: %+v", d)
	case want != "" && (d == nil || d.Status != want):
		t.Errorf("record = %+v, want status %q", d, want)
	}
}

func TestCoordinatorFailures(t *testing.T) {
	cases := []struct {
		name      string
		setup     func(f *coordFixture)
		sinkErr   error
		wantAbort bool
		wantState Status // record status after the failure; "" = no record
	}{
		{name: "sink prepare error aborts", sinkErr: errBoom, wantAbort: true},
		{name: "persist prepared error aborts", setup: func(f *coordFixture) { f.fs.saveErr = errBoom }, wantAbort: true},
		{name: "sink commit error aborts", setup: func(f *coordFixture) {
			f.c.CommitSink = func(context.Context, string) error { return errBoom }
		}, wantAbort: true, wantState: StatusPrepared},
		{name: "persist completed error does not abort", setup: func(f *coordFixture) { f.fs.updateErr = errBoom },
			wantState: StatusPrepared},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, id := failCheckpoint(t, c.setup, c.sinkErr, errBoom)
			calls := f.log.get()
			if got := slices.Contains(calls, "abort "+id); got != c.wantAbort {
				t.Errorf("aborted = %v, want %v (calls %q)", got, c.wantAbort, calls)
			}
			for _, call := range calls {
				if strings.HasPrefix(call, "completed") || strings.HasPrefix(call, "offsets") {
					t.Errorf("%q after a failure", call)
				}
			}
			f.checkRecordStatus(t, id, c.wantState)
		})
	}
}

// A fenced writer is a zombie: the writer that fenced it may hold a
// transaction of the same checkpoint id, so the zombie must not abort it.
func TestCoordinatorFencedDoesNotAbortTheSink(t *testing.T) {
	fenced := fmt.Errorf("epoch 1: _writer changed: %w", ErrFenced)
	cases := []struct {
		name      string
		setup     func(f *coordFixture)
		sinkErr   error
		wantState Status // record status after the failure; "" = no record
	}{
		{name: "persist prepared fenced", setup: func(f *coordFixture) { f.fs.saveErr = fenced }},
		{name: "sink prepare fenced", sinkErr: fenced},
		{name: "sink commit fenced", setup: func(f *coordFixture) {
			f.c.CommitSink = func(context.Context, string) error { return fenced }
		}, wantState: StatusPrepared},
		{name: "persist completed fenced", setup: func(f *coordFixture) { f.fs.updateErr = fenced },
			wantState: StatusPrepared},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, id := failCheckpoint(t, c.setup, c.sinkErr, ErrFenced)
			for _, call := range f.log.get() {
				if strings.HasPrefix(call, "abort") || strings.HasPrefix(call, "completed") || strings.HasPrefix(call, "offsets") {
					t.Errorf("%q after being fenced (calls %q)", call, f.log.get())
				}
			}
			f.checkRecordStatus(t, id, c.wantState)
		})
	}
}

func TestCoordinatorOffsetCommitFailureIsLoggedNotFatal(t *testing.T) {
	f := newCoordFixture(t)
	var buf bytes.Buffer
	var mu sync.Mutex
	f.c.Logger = slog.New(slog.NewTextHandler(&lockedWriter{w: &buf, mu: &mu}, nil))
	f.c.CommitOffsets = func(context.Context, []byte) error { return errBoom }
	f.c.Start(ctx)
	feed(f.c, NewID(1))
	feed(f.c, NewID(2))
	f.c.Stop()
	select {
	case err := <-f.c.Fatal():
		t.Fatalf("fatal: %v", err)
	default:
	}
	if d, _ := f.s.LoadLatestCompleted(ctx); idOf(d) != NewID(2) {
		t.Fatalf("latest completed = %s; offset failures must not stop checkpoints", idOf(d))
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(buf.String(), "boom") {
		t.Fatalf("offset commit error not logged: %q", buf.String())
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestCoordinatorHookFailAbortsOnlyBeforeTheSinkCommit(t *testing.T) {
	for _, step := range Steps {
		t.Run(string(step), func(t *testing.T) {
			f := newCoordFixture(t)
			f.c.Hook = func(s Step, _ string) HookAction {
				if s == step {
					return HookFail
				}
				return HookContinue
			}
			f.c.Start(ctx)
			feed(f.c, NewID(1))
			f.stopOnFatal(t, ErrInjected)
			calls := f.log.get()
			wantAbort := step == StepPersistPrepared
			if got := slices.Contains(calls, "abort "+NewID(1)); got != wantAbort {
				t.Errorf("aborted = %v, want %v (calls %q)", got, wantAbort, calls)
			}
		})
	}
}

func TestCoordinatorHookHaltStopsEverythingSilently(t *testing.T) {
	f := newCoordFixture(t)
	f.c.Hook = func(s Step, _ string) HookAction {
		if s == StepPersistPrepared {
			return HookHalt
		}
		return HookContinue
	}
	f.c.Start(ctx)
	feed(f.c, NewID(1))
	feed(f.c, NewID(2))
	f.c.Stop()
	if calls := f.log.get(); len(calls) != 0 {
		t.Fatalf("calls after halt: %q", calls)
	}
	select {
	case err := <-f.c.Fatal():
		t.Fatalf("halt reported %v", err)
	default:
	}
	if saves := f.fs.saves; !slices.Equal(saves, []string{NewID(1)}) {
		t.Fatalf("saves = %q, want only the first", saves)
	}
}

func TestCoordinatorIgnoresEventsAfterFatal(t *testing.T) {
	f := newCoordFixture(t)
	f.c.Start(ctx)
	f.c.OnBarrierInjected(NewID(1), nil)
	f.c.OnStateSnapshot(NewID(1), nil, nil)
	f.c.OnSinkPrepared(NewID(1), errBoom)
	waitFor(t, f.c.Fatal(), "fatal error")
	feed(f.c, NewID(2))
	f.c.Stop()
	if len(f.fs.saves) != 0 {
		t.Fatalf("saved %q after a fatal error", f.fs.saves)
	}
	select {
	case err := <-f.c.Fatal():
		t.Fatalf("second fatal error reported: %v", err)
	default:
	}
}

func TestCoordinatorStopFinalizesQueuedCheckpoints(t *testing.T) {
	f := newCoordFixture(t)
	release := make(chan struct{})
	f.c.CommitSink = func(_ context.Context, id string) error {
		<-release
		f.log.add("commit %s", id)
		return nil
	}
	f.c.Start(ctx)
	feed(f.c, NewID(1))
	feed(f.c, NewID(2))
	stopped := make(chan struct{})
	go func() { f.c.Stop(); close(stopped) }()
	select {
	case <-stopped:
		t.Fatal("Stop returned with finalization in flight")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	waitFor(t, stopped, "Stop")
	if d, _ := f.s.LoadLatestCompleted(ctx); idOf(d) != NewID(2) {
		t.Fatalf("latest completed after Stop = %s, want %s", idOf(d), NewID(2))
	}
}

func TestCoordinatorStopIsIdempotentAndSafeBeforeStart(t *testing.T) {
	c := NewCoordinator(NewFileStorage(t.TempDir()), "t")
	c.Stop()
	c.Stop()
	c.Start(ctx) // after Stop: does nothing
	feed(c, NewID(1))
	c.Stop()

	c2 := NewCoordinator(NewFileStorage(t.TempDir()), "t")
	c2.Start(ctx)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(c2.Stop)
	}
	wg.Wait()
}

func TestCoordinatorCancelledContextIsFatalAndAborts(t *testing.T) {
	f := newCoordFixture(t)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	f.c.Start(cctx)
	feed(f.c, NewID(1))
	f.stopOnFatal(t, context.Canceled)
	if !slices.Contains(f.log.get(), "abort "+NewID(1)) {
		t.Fatalf("not aborted: %q", f.log.get())
	}
}

// A store that stops answering stalled the failed step for its whole
// operation timeout, and then the sink abort for a second one (93 s in
// all on S3): the abort after a failure has a short deadline of its own,
// and the error says that the abort stalled too.
func TestCoordinatorAbortAfterAFailureIsBoundedAndNamed(t *testing.T) {
	defer SetCleanupTimeout(200 * time.Millisecond)()
	f := newCoordFixture(t)
	f.fs.saveErr = errBoom
	f.c.AbortSink = func(ctx context.Context, id string) error {
		// A stalled store: only a deadline ends the abort (or, so that
		// the test fails rather than hangs without one, 8 s).
		select {
		case <-ctx.Done():
			return fmt.Errorf("sink abort %s: %w", id, ctx.Err())
		case <-time.After(8 * time.Second):
			return fmt.Errorf("sink abort %s: no deadline", id)
		}
	}
	f.c.Start(ctx)
	id := NewID(1)
	start := time.Now()
	f.c.OnBarrierInjected(id, []byte("o"))
	f.c.OnStateSnapshot(id, nil, nil)
	f.c.OnSinkPrepared(id, nil)
	err := waitFor(t, f.c.Fatal(), "fatal error")
	waited := time.Since(start)
	f.c.Stop()
	if waited > 5*time.Second {
		t.Errorf("the failure was reported after %v, want about the 200ms cleanup deadline", waited)
	}
	if !errors.Is(err, errBoom) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("fatal = %v, want the failure and the abort's deadline", err)
	}
	for _, want := range []string{"persist prepared", "abort sink"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("fatal error does not say %q: %v", want, err)
		}
	}
}
