package checkpoint

import (
	"context"
	"fmt"
)

// Action is what recovery decided to do.
type Action int

const (
	// ActionStartFresh: there is no checkpoint to restore; start from the
	// beginning with empty state.
	ActionStartFresh Action = iota
	// ActionRestore: restore Decision.Checkpoint, the latest completed
	// checkpoint.
	ActionRestore
	// ActionPromote: the latest checkpoint was prepared and its sink
	// transaction provably committed; it was promoted to completed and is
	// Decision.Checkpoint.
	ActionPromote
)

// String returns the action's name.
func (a Action) String() string {
	switch a {
	case ActionStartFresh:
		return "start-fresh"
	case ActionRestore:
		return "restore"
	case ActionPromote:
		return "promote"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// Decision is the outcome of Recover.
type Decision struct {
	// Action says what was decided.
	Action Action
	// Checkpoint is the completed checkpoint to restore (state, offsets,
	// state directories); nil for ActionStartFresh.
	Checkpoint *CheckpointData
	// Latest is the latest checkpoint of any status as found before any
	// promotion (nil when there was none). Derive the next checkpoint id
	// from it (NextID(Latest.ID)) so that the id of an abandoned prepared
	// checkpoint is never reused.
	Latest *CheckpointData
	// Abandoned is the prepared checkpoint whose sink transaction did not
	// commit, if any: its output is not visible and the new sink instance
	// must abort its transaction (a transactional producer does so when it
	// takes over the transactional id).
	Abandoned *CheckpointData
}

// CommittedFunc reports whether the sink transaction of a prepared
// checkpoint committed. It must answer from the sink's durable knowledge
// (a transaction marker, a committed-transactions table), not guess: an
// error makes Recover fail rather than choose. A "no" must be final, so
// that no late commit can follow it; rolling forward (commit the
// transaction idempotently, answer true) needs no such arbitration: see
// "Recovery" in the package documentation.
type CommittedFunc func(ctx context.Context, cp *CheckpointData) (bool, error)

// Recover decides, from the latest checkpoint in s and the sink's
// knowledge of its transaction, which checkpoint a restarting pipeline
// restores; see the decision table in the package documentation. When the
// decision is ActionPromote it has already rewritten the checkpoint as
// completed in s. A nil committed means the sink cannot prove any commit,
// so a prepared checkpoint is never promoted.
func Recover(ctx context.Context, s Storage, committed CommittedFunc) (Decision, error) {
	latest, err := s.Load(ctx)
	if err != nil {
		return Decision{}, fmt.Errorf("checkpoint: recover: %w", err)
	}
	d := Decision{Latest: latest}

	if latest != nil && latest.Completed() {
		d.Action, d.Checkpoint = ActionRestore, latest
		return d, nil
	}

	if latest != nil { // prepared
		ok := false
		if committed != nil {
			ok, err = committed(ctx, latest)
			if err != nil {
				return Decision{}, fmt.Errorf("checkpoint: recover: did %q commit: %w", latest.ID, err)
			}
		}
		if ok {
			// The output of this checkpoint is visible: restoring anything
			// older would produce it again. Promote before restoring, so
			// that a crash right here repeats the same decision.
			if err := s.UpdateStatus(ctx, latest.ID, StatusCompleted); err != nil {
				return Decision{}, fmt.Errorf("checkpoint: recover: promote: %w", err)
			}
			promoted := *latest
			promoted.Status = StatusCompleted
			d.Action, d.Checkpoint = ActionPromote, &promoted
			return d, nil
		}
		d.Abandoned = latest
	}

	// Either nothing at all, or a prepared checkpoint whose output never
	// became visible: fall back to the latest completed one.
	prev, err := s.LoadLatestCompleted(ctx)
	if err != nil {
		return Decision{}, fmt.Errorf("checkpoint: recover: %w", err)
	}
	if prev == nil {
		d.Action = ActionStartFresh
		return d, nil
	}
	d.Action, d.Checkpoint = ActionRestore, prev
	return d, nil
}
