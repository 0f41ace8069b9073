package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Step identifies a point in the coordinated checkpoint protocol. The test
// hook fires AFTER each step succeeds, which is how the crash-window tests
// halt the coordinator at exact protocol positions.
type Step string

const (
	StepPersistPrepared  Step = "persist-prepared"  // checkpoint file written with status=prepared
	StepSinkCommitted    Step = "sink-committed"    // sink transaction committed (EndTxn)
	StepPersistCompleted Step = "persist-completed" // status promoted to completed
	StepOffsetsCommitted Step = "offsets-committed" // advisory broker offset commit
)

// Steps lists the protocol steps in the order the Coordinator takes them.
var Steps = []Step{StepPersistPrepared, StepSinkCommitted, StepPersistCompleted, StepOffsetsCommitted}

// HookAction is what a test hook tells the coordinator to do after a step.
type HookAction int

const (
	// HookContinue proceeds normally.
	HookContinue HookAction = iota
	// HookFail injects a failure at this step: the coordinator aborts
	// the sink transaction (unless it already committed) and reports a
	// fatal error.
	HookFail
	// HookHalt simulates a process crash: the coordinator stops doing
	// anything, silently, forever. The pipeline is left to be
	// cancelled by the test.
	HookHalt
)

// String returns the action's name.
func (a HookAction) String() string {
	switch a {
	case HookContinue:
		return "continue"
	case HookFail:
		return "fail"
	case HookHalt:
		return "halt"
	}
	return fmt.Sprintf("HookAction(%d)", int(a))
}

// ErrInjected is the fatal error (wrapped) reported when a Hook returns
// HookFail.
var ErrInjected = errors.New("checkpoint: failure injected by hook")

// Coordinator drives the two-phase checkpoint protocol:
//
//	offsets (barrier injection) ─┐
//	operator state (barrier tap) ─┼─► sink prepared ─► persist(prepared)
//	sink ack (PreCommit done)    ─┘        │
//	                                       ▼
//	              sink.Commit ─► persist(completed) ─► source.CommitOffsets
//
// The three inputs for a checkpoint may arrive in any order, from any
// goroutine. When the last of them arrives, the checkpoint is queued for
// a single worker goroutine (started by Start) that finalizes checkpoints
// one at a time in the order they became ready. Finalization never runs
// on the caller's goroutine: OnSinkPrepared is called from the sink's
// write path, which must stay free to be unblocked by CommitSink.
//
// Any failure before the sink commit aborts the sink transaction and fails
// the pipeline (Fatal); a failure after it only fails the pipeline, since
// recovery promotes a prepared checkpoint whose transaction committed (see
// Recover). After a fatal error the Coordinator ignores every further
// event.
//
// A fenced writer does no further harm: when a step fails with an error
// wrapping ErrFenced (another writer acquired the store: this one is a
// zombie), the Coordinator does NOT call AbortSink, and only reports the
// error on Fatal. The new writer owns every transaction decision, and it
// may be using the same checkpoint id (the zombie never moved the
// pointers to it): an abort by the zombie would abort the new writer's
// transaction of that id and make its commit fail. The zombie's open
// transaction is left to the new writer's recovery, which decides it.
//
// Create one with NewCoordinator (the zero value is not usable), set the
// exported fields before Start and do not change them after.
type Coordinator struct {
	// Storage persists the checkpoint records.
	Storage Storage
	// TxnID is the sink's transactional id, recorded in each checkpoint
	// for diagnostics.
	TxnID string

	// CommitSink / AbortSink are the sink's transaction controls, called
	// with the checkpoint id whose transaction to end. A nil CommitSink
	// makes the sink-commit step a no-op (a sink without transactions);
	// a nil AbortSink skips the abort. AbortSink is never called for a
	// failure wrapping ErrFenced. A roll-forward job leaves it nil: a
	// failed save of the prepared record may have landed (see Recover).
	CommitSink func(ctx context.Context, id string) error
	AbortSink  func(ctx context.Context, id string) error

	// CommitOffsets commits source offsets externally after a
	// checkpoint completes. Advisory: errors are logged, not fatal.
	// Nil when the source has no external commit.
	CommitOffsets func(ctx context.Context, offsets []byte) error

	// Hook is a test-only seam fired after each protocol step.
	Hook func(step Step, id string) HookAction

	// OnCompleted, if set, is called with the checkpoint ID once it is
	// promoted to StatusCompleted. Observability only (progress signal
	// for supervisors); must not block.
	OnCompleted func(id string)

	// Logger receives advisory errors (offset commits, events ignored
	// after a failure). Nil discards them.
	Logger *slog.Logger

	fatal chan error // buffered 1; first fatal error only; never closed

	mu       sync.Mutex
	pending  map[string]*pendingCheckpoint
	ready    []readyItem   // checkpoints waiting for the worker, in order
	wake     chan struct{} // buffered 1; signals the worker that ready grew
	started  bool
	stopping bool
	dead     bool          // failed or halted: ignore everything
	done     chan struct{} // closed when the worker exits
	stopOnce sync.Once
}

// pendingCheckpoint collects the three inputs of one checkpoint.
type pendingCheckpoint struct {
	haveOffsets, haveState, haveSink bool

	offsets   []byte
	state     map[string][]byte
	stateDirs map[string]string
	sinkErr   error
}

// readyItem is a checkpoint whose inputs are all in.
type readyItem struct {
	id string
	p  *pendingCheckpoint
}

// NewCoordinator creates a coordinator. Call Start before wiring it into a
// pipeline and Stop after the pipeline finishes.
func NewCoordinator(storage Storage, txnID string) *Coordinator {
	return &Coordinator{
		Storage: storage,
		TxnID:   txnID,
		fatal:   make(chan error, 1),
		pending: make(map[string]*pendingCheckpoint),
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
	}
}

// Fatal returns a channel that receives the first unrecoverable
// coordination error (buffered; never closed).
func (c *Coordinator) Fatal() <-chan error { return c.fatal }

// Start launches the finalize worker. It runs until Stop is called; ctx
// bounds the storage, sink and offset calls made while finalizing. A
// second Start does nothing.
func (c *Coordinator) Start(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started || c.stopping {
		return
	}
	c.started = true
	go c.run(ctx)
}

// Stop closes the event stream and waits for in-flight finalization:
// checkpoints already queued (all three inputs in) are finalized before
// it returns, so the final checkpoint of a drained pipeline completes.
// Events after Stop are ignored. Idempotent; safe before Start.
func (c *Coordinator) Stop() {
	c.stopOnce.Do(func() {
		c.mu.Lock()
		c.stopping = true
		started := c.started
		c.mu.Unlock()
		c.signal()
		if started {
			<-c.done
		} else {
			close(c.done)
		}
	})
	<-c.done
}

// OnBarrierInjected records the barrier-aligned source offsets for a
// checkpoint at the moment its barrier entered the stream.
func (c *Coordinator) OnBarrierInjected(id string, offsets []byte) {
	c.event(id, "barrier", func(p *pendingCheckpoint) bool {
		dup := p.haveOffsets
		p.haveOffsets, p.offsets = true, offsets
		return dup
	})
}

// OnStateSnapshot records operator/worker state captured when the barrier
// reached the pre-sink tap. stateDirs carries native (hard-link) state
// directory references for Checkpointable backends, as paths relative to
// Storage.StateDir(id).
func (c *Coordinator) OnStateSnapshot(id string, state map[string][]byte, stateDirs map[string]string) {
	c.event(id, "state", func(p *pendingCheckpoint) bool {
		dup := p.haveState
		p.haveState, p.state, p.stateDirs = true, state, stateDirs
		return dup
	})
}

// OnSinkPrepared is called by the sink (via its notifier) once all
// pre-barrier output for this checkpoint is staged in the open
// transaction, or with sinkErr when staging failed. It queues
// finalization on the coordinator worker — never finalize inline: this
// runs on the sink's Write goroutine, which must stay free to be
// unblocked by CommitSink.
func (c *Coordinator) OnSinkPrepared(id string, sinkErr error) {
	c.event(id, "sink-prepared", func(p *pendingCheckpoint) bool {
		dup := p.haveSink
		p.haveSink, p.sinkErr = true, sinkErr
		return dup
	})
}

// event applies one input to checkpoint id and queues the checkpoint for
// the worker once all three are in. It never blocks on the worker.
func (c *Coordinator) event(id, kind string, apply func(*pendingCheckpoint) (dup bool)) {
	c.mu.Lock()
	if c.dead || c.stopping {
		c.mu.Unlock()
		c.logger().Debug("checkpoint: event ignored: coordinator stopped or failed", "id", id, "event", kind)
		return
	}
	p := c.pending[id]
	if p == nil {
		p = &pendingCheckpoint{}
		c.pending[id] = p
	}
	if apply(p) {
		c.logger().Warn("checkpoint: duplicate event; the later one wins", "id", id, "event", kind)
	}
	ready := p.haveOffsets && p.haveState && p.haveSink
	if ready {
		delete(c.pending, id)
		c.ready = append(c.ready, readyItem{id: id, p: p})
	}
	c.mu.Unlock()
	if ready {
		c.signal()
	}
}

// signal wakes the worker without blocking.
func (c *Coordinator) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// run is the finalize worker.
func (c *Coordinator) run(ctx context.Context) {
	defer close(c.done)
	for {
		c.mu.Lock()
		if c.dead {
			c.mu.Unlock()
			return
		}
		if len(c.ready) == 0 {
			stopping := c.stopping
			c.mu.Unlock()
			if stopping {
				return
			}
			<-c.wake
			continue
		}
		item := c.ready[0]
		c.ready = c.ready[1:]
		c.mu.Unlock()
		c.finalize(ctx, item.id, item.p)
	}
}

// finalize runs the protocol for one checkpoint. The order is the
// protocol: the prepared record is the logged commit decision, so it must
// be durable before the sink commits; the record becomes completed only
// after the commit; and source offsets are committed externally only once
// the checkpoint that covers them is completed, so an external offset
// never gets ahead of what recovery restores.
func (c *Coordinator) finalize(ctx context.Context, id string, p *pendingCheckpoint) {
	if p.sinkErr != nil {
		c.fail(ctx, id, true, fmt.Errorf("checkpoint: %q: sink prepare: %w", id, p.sinkErr))
		return
	}
	data := &CheckpointData{
		ID:        id,
		Timestamp: time.Now().UTC(),
		Operators: p.state,
		Source:    map[string][]byte{SourceOffsetsKey: p.offsets},
		Status:    StatusPrepared,
		TxnID:     c.TxnID,
		StateDirs: p.stateDirs,
	}

	// 1. Log the commit decision.
	if err := c.Storage.Save(ctx, data); err != nil {
		c.fail(ctx, id, true, fmt.Errorf("checkpoint: %q: persist prepared: %w", id, err))
		return
	}
	if !c.afterStep(ctx, StepPersistPrepared, id, true) {
		return
	}

	// 2. Commit the sink transaction. From here on the output is visible
	// and must never be aborted or produced again.
	if c.CommitSink != nil {
		if err := c.CommitSink(ctx, id); err != nil {
			// Whether the commit landed is unknown; aborting is what the
			// protocol prescribes before a commit, and recovery asks the
			// sink which way it went.
			c.fail(ctx, id, true, fmt.Errorf("checkpoint: %q: sink commit: %w", id, err))
			return
		}
	}
	if !c.afterStep(ctx, StepSinkCommitted, id, false) {
		return
	}

	// 3. Promote the record.
	if err := c.Storage.UpdateStatus(ctx, id, StatusCompleted); err != nil {
		c.fail(ctx, id, false, fmt.Errorf("checkpoint: %q: persist completed: %w", id, err))
		return
	}
	if !c.afterStep(ctx, StepPersistCompleted, id, false) {
		return
	}
	if c.OnCompleted != nil {
		c.OnCompleted(id)
	}

	// 4. Advisory external offset commit.
	if c.CommitOffsets != nil {
		if err := c.CommitOffsets(ctx, p.offsets); err != nil {
			c.logger().Warn("checkpoint: commit offsets (advisory)", "id", id, "err", err)
			return
		}
	}
	c.afterStep(ctx, StepOffsetsCommitted, id, false)
}

// afterStep fires the hook after a successful step and reports whether to
// go on. abortable says whether the sink transaction is still open.
func (c *Coordinator) afterStep(ctx context.Context, step Step, id string, abortable bool) bool {
	if c.Hook == nil {
		return true
	}
	switch a := c.Hook(step, id); a {
	case HookContinue:
		return true
	case HookHalt:
		c.mu.Lock()
		c.dead = true
		c.ready, c.pending = nil, nil
		c.mu.Unlock()
		return false
	default:
		c.fail(ctx, id, abortable, fmt.Errorf("checkpoint: %q: after %s: %w", id, step, ErrInjected))
		return false
	}
}

// fail aborts the sink transaction of id if it is still open, reports err
// on Fatal, and makes the coordinator ignore everything after. A fenced
// writer (err wraps ErrFenced) aborts nothing: the transaction decisions
// belong to the writer that fenced it, which may hold a transaction of
// the same id (see Coordinator).
func (c *Coordinator) fail(ctx context.Context, id string, abort bool, err error) {
	c.mu.Lock()
	c.dead = true
	c.ready, c.pending = nil, nil
	c.mu.Unlock()
	if abort && c.AbortSink != nil && !errors.Is(err, ErrFenced) {
		if aerr := c.AbortSink(ctx, id); aerr != nil {
			err = errors.Join(err, fmt.Errorf("checkpoint: %q: abort sink: %w", id, aerr))
		}
	}
	select {
	case c.fatal <- err:
	default: // only the first error is reported
	}
}

func (c *Coordinator) logger() *slog.Logger {
	if c.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Logger
}
