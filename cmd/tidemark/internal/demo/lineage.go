package demo

import (
	"context"
	"errors"
	"fmt"

	"github.com/tidemark-io/tidemark/checkpoint"
)

// Segment is a range (After, Through] of checkpoint ids: the checkpoints
// one lineage of the job took, whose committed transactions are part of
// the output of the lineages descending from it. After is "" for the
// first lineage (it starts at record 0).
type Segment struct {
	After   string `json:"after,omitempty"`
	Through string `json:"through"`
}

// Lineage is the history of one checkpoint's output in the sink: the
// segments of checkpoint ids whose committed transactions produced it, in
// order. It is one segment, ("", id], unless the job was rolled back: a
// savepoint restored onto a store holding newer checkpoints starts a new
// lineage under a fresh id after every existing one (see
// checkpoint.ExtractCheckpoint), and the output the abandoned lineage
// committed after the savepoint is produced again by the new one. The
// gaps between segments are those abandoned transactions.
//
// Every checkpoint of the job records the lineage through its own id in
// its operator state, so a savepoint carries the history of the
// checkpoint it archived, however many rollbacks it took to get there.
//
// A job started from another job's state (a savepoint restored as a new
// job, checkpoint.JobStartKey) begins at its first checkpoint: its first
// segment starts after that id, and the transactions at or below it are
// the earlier job's, not this one's.
type Lineage []Segment

// Includes reports whether the committed transaction of checkpoint id is
// output of this lineage: it is in no gap between two segments. Ids after
// the last segment count (a transaction nothing can explain is still
// output, and the check must see it), so a lineage of one segment
// includes every transaction.
func (l Lineage) Includes(id string) bool {
	if len(l) > 0 && id <= l[0].After {
		return false // an earlier job's
	}
	for i := 0; i+1 < len(l); i++ {
		if id > l[i].Through && id <= l[i+1].After {
			return false
		}
	}
	return true
}

// RolledBack reports whether the lineage has gaps: the job was rolled
// back to a savepoint at least once.
func (l Lineage) RolledBack() bool { return len(l) > 1 }

// StartedAt returns the id of the checkpoint a job started from another
// job's state began at, or "" for a job that began at record 0.
func (l Lineage) StartedAt() string {
	if len(l) == 0 {
		return ""
	}
	return l[0].After
}

// validate checks that l is a lineage a job can have recorded: valid ids,
// every segment after the one before it.
func (l Lineage) validate() error {
	prev := ""
	for i, s := range l {
		if s.After != "" {
			if err := checkpoint.ValidateID(s.After); err != nil {
				return fmt.Errorf("segment %d: %w", i, err)
			}
		}
		if err := checkpoint.ValidateID(s.Through); err != nil {
			return fmt.Errorf("segment %d: %w", i, err)
		}
		if (i > 0 && s.After <= prev) || s.Through < s.After {
			return fmt.Errorf("segment %d (%q, %q] does not follow %q", i, s.After, s.Through, prev)
		}
		prev = s.Through
	}
	return nil
}

// lineageRun is the lineage of the checkpoints one run takes: the closed
// segments of its history and the start of its own, open one.
type lineageRun struct {
	closed Lineage
	after  string
}

// through returns the lineage of a checkpoint id of the run.
func (r lineageRun) through(id string) Lineage {
	return append(r.closed[:len(r.closed):len(r.closed)], Segment{After: r.after, Through: id})
}

// resumeLineage returns the lineage of a run that restored cp (nil: a
// fresh start), whose operator state ops holds.
//
// The restored checkpoint continues the lineage it records when it has
// the id it recorded it under (a resume, after a crash or a completed
// run, or a savepoint restored into another store under its own id).
// Under another id it is a savepoint restored as a new lineage: the
// history it records closes, and the run's transactions, all after cp's
// id, start a new segment. A savepoint of a restored checkpoint that
// never ran holds the operator state of the one it was restored from, so
// it too carries the right history.
//
// A checkpoint written before lineages were recorded counts as one
// segment up to its id, or, for a rolled-back one, up to the id it was
// restored from.
func resumeLineage(cp *checkpoint.CheckpointData, ops operatorState) (lineageRun, error) {
	if cp == nil {
		return lineageRun{}, nil
	}
	if cp.StartsJob() {
		return lineageRun{after: cp.ID}, nil // the state's history is another job's
	}
	hist := ops.Lineage
	if len(hist) == 0 {
		through := cp.ID
		if from := string(cp.Source[checkpoint.RestoredFromKey]); checkpoint.ValidateID(from) == nil && from < cp.ID {
			through = from
		}
		hist = Lineage{{Through: through}}
	}
	if err := hist.validate(); err != nil {
		return lineageRun{}, fmt.Errorf("%w: checkpoint %s: operator state: lineage: %v", ErrCorruptOutput, cp.ID, err)
	}
	last := hist[len(hist)-1]
	switch {
	case last.Through == cp.ID:
		return lineageRun{closed: hist[:len(hist)-1], after: last.After}, nil
	case last.Through < cp.ID:
		return lineageRun{closed: hist, after: cp.ID}, nil
	}
	return lineageRun{}, fmt.Errorf("%w: checkpoint %s: operator state: lineage through %s, after the checkpoint", ErrCorruptOutput, cp.ID, last.Through)
}

// lineageOf returns the lineage of a run of one process that restored cp
// (nil: a fresh start), whose state records stored. A checkpoint that a
// savepoint restore made under a new id (it names the id it was restored
// from, an older one) starts a new lineage: the history its state
// recorded closes where that state was taken (see closeAt), and the
// run's transactions, all after cp's id, open a new segment. Any other
// checkpoint continues its state's. load reads a checkpoint record.
func lineageOf(ctx context.Context, load func(context.Context, string) (*checkpoint.CheckpointData, error), cp *checkpoint.CheckpointData, stored lineageRun) (lineageRun, error) {
	if cp == nil {
		return lineageRun{}, nil
	}
	if cp.StartsJob() {
		return lineageRun{after: cp.ID}, nil // the state's history is another job's
	}
	from := restoredFrom(cp)
	if from == "" {
		return stored, nil
	}
	through, err := closeAt(ctx, load, from, stored)
	if err != nil {
		return lineageRun{}, err
	}
	lr := lineageRun{closed: stored.through(through), after: cp.ID}
	if err := lr.through(cp.ID).validate(); err != nil {
		return lineageRun{}, fmt.Errorf("%w: checkpoint %s: lineage: %v", ErrCorruptOutput, cp.ID, err)
	}
	return lr, nil
}

// restoredFrom returns the older id a rollback restored cp from, or "".
func restoredFrom(cp *checkpoint.CheckpointData) string {
	from := string(cp.Source[checkpoint.RestoredFromKey])
	if checkpoint.ValidateID(from) != nil || from >= cp.ID {
		return ""
	}
	return from
}

// closeAt returns the id of the checkpoint a state restored from
// checkpoint from was taken at: from itself, unless from is a restored
// checkpoint no run wrote to (its state's lineage does not start at it),
// whose state is that of the checkpoint it was restored from, and so on.
// A record gone from the store (retention) ends the search at its id.
func closeAt(ctx context.Context, load func(context.Context, string) (*checkpoint.CheckpointData, error), from string, stored lineageRun) (string, error) {
	for stored.after != from {
		rec, err := load(ctx, from)
		if errors.Is(err, checkpoint.ErrNotFound) {
			return from, nil
		}
		if err != nil {
			return "", fmt.Errorf("demo: lineage: %w", err)
		}
		older := restoredFrom(rec)
		if older == "" {
			return from, nil
		}
		from = older
	}
	return from, nil
}
