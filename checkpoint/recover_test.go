package checkpoint

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestRecoverDecisionTable tests every row of the decision table in the
// package documentation.
func TestRecoverDecisionTable(t *testing.T) {
	type answer int
	const (
		notAsked answer = iota
		yes
		no
		fails
		nilFunc
	)
	cases := []struct {
		name      string
		saved     []*CheckpointData
		committed answer
		wantAct   Action
		wantCP    string // restored id, "" for none
		wantAband string // abandoned id
		wantErr   bool
	}{
		{name: "nothing at all starts fresh", wantAct: ActionStartFresh},
		{name: "latest completed is restored",
			saved:   []*CheckpointData{record(NewID(1), StatusCompleted), record(NewID(2), StatusCompleted)},
			wantAct: ActionRestore, wantCP: NewID(2)},
		{name: "legacy empty status is restored",
			saved:   []*CheckpointData{record(NewID(1), "")},
			wantAct: ActionRestore, wantCP: NewID(1)},
		{name: "prepared whose txn committed is promoted",
			saved:     []*CheckpointData{record(NewID(1), StatusCompleted), record(NewID(2), StatusPrepared)},
			committed: yes, wantAct: ActionPromote, wantCP: NewID(2)},
		{name: "first checkpoint prepared and committed is promoted",
			saved:     []*CheckpointData{record(NewID(1), StatusPrepared)},
			committed: yes, wantAct: ActionPromote, wantCP: NewID(1)},
		{name: "prepared whose txn did not commit falls back to latest completed",
			saved:     []*CheckpointData{record(NewID(1), StatusCompleted), record(NewID(2), StatusPrepared)},
			committed: no, wantAct: ActionRestore, wantCP: NewID(1), wantAband: NewID(2)},
		{name: "prepared whose txn did not commit with no completed starts fresh",
			saved:     []*CheckpointData{record(NewID(1), StatusPrepared)},
			committed: no, wantAct: ActionStartFresh, wantAband: NewID(1)},
		{name: "commit question failing makes no decision",
			saved:     []*CheckpointData{record(NewID(1), StatusCompleted), record(NewID(2), StatusPrepared)},
			committed: fails, wantErr: true},
		{name: "no commit knowledge never promotes",
			saved:     []*CheckpointData{record(NewID(1), StatusCompleted), record(NewID(2), StatusPrepared)},
			committed: nilFunc, wantAct: ActionRestore, wantCP: NewID(1), wantAband: NewID(2)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := NewFileStorage(t.TempDir())
			for _, d := range c.saved {
				mustSave(t, s, d)
			}
			asked := 0
			var fn CommittedFunc = func(_ context.Context, cp *CheckpointData) (bool, error) {
				asked++
				if cp.Completed() {
					t.Errorf("asked about completed checkpoint %s", cp.ID)
				}
				switch c.committed {
				case yes:
					return true, nil
				case fails:
					return false, errBoom
				}
				return false, nil
			}
			if c.committed == nilFunc {
				fn = nil
			}
			d, err := Recover(ctx, s, fn)
			if c.wantErr {
				if !errors.Is(err, errBoom) {
					t.Fatalf("err = %v, want the commit question's error", err)
				}
				if latest, _ := s.Load(ctx); latest.Completed() {
					t.Fatal("failed recovery promoted anyway")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (c.committed == notAsked || c.committed == nilFunc) != (asked == 0) {
				t.Errorf("commit question asked %d times (row says %v)", asked, c.committed)
			}
			if d.Action != c.wantAct {
				t.Errorf("Action = %v, want %v", d.Action, c.wantAct)
			}
			if got := idOf(d.Checkpoint); (c.wantCP == "" && d.Checkpoint != nil) || (c.wantCP != "" && got != c.wantCP) {
				t.Errorf("Checkpoint = %s, want %q", got, c.wantCP)
			}
			if d.Checkpoint != nil && !d.Checkpoint.Completed() {
				t.Errorf("restoring a checkpoint that is not completed")
			}
			if got := idOf(d.Abandoned); (c.wantAband == "" && d.Abandoned != nil) || (c.wantAband != "" && got != c.wantAband) {
				t.Errorf("Abandoned = %s, want %q", got, c.wantAband)
			}
			if len(c.saved) > 0 && idOf(d.Latest) != c.saved[len(c.saved)-1].ID {
				t.Errorf("Latest = %s", idOf(d.Latest))
			}
			// The storage must now agree with the decision: a promoted
			// checkpoint is the latest completed one.
			if c.wantCP != "" {
				lc, err := s.LoadLatestCompleted(ctx)
				if err != nil || idOf(lc) != c.wantCP {
					t.Errorf("after recovery LoadLatestCompleted = %s, %v; want %s", idOf(lc), err, c.wantCP)
				}
			}
		})
	}
}

func TestRecoverRestoresLatestCompletedWhenLatestPointerIsLost(t *testing.T) {
	dir := t.TempDir()
	s := NewFileStorage(dir)
	mustSave(t, s, record(NewID(1), StatusCompleted))
	if err := os.Remove(filepath.Join(dir, "latest.json")); err != nil {
		t.Fatal(err)
	}
	d, err := Recover(ctx, s, nil)
	if err != nil || d.Action != ActionRestore || idOf(d.Checkpoint) != NewID(1) {
		t.Fatalf("Recover = %+v, %v", d, err)
	}
}

func TestRecoverIsRepeatableAfterPromotion(t *testing.T) {
	s := NewFileStorage(t.TempDir())
	mustSave(t, s, record(NewID(1), StatusPrepared))
	yes := func(context.Context, *CheckpointData) (bool, error) { return true, nil }
	if _, err := Recover(ctx, s, yes); err != nil {
		t.Fatal(err)
	}
	// A crash right after promotion and a second recovery must restore the
	// same checkpoint, now without asking the sink.
	d, err := Recover(ctx, s, func(context.Context, *CheckpointData) (bool, error) {
		t.Error("asked again about a promoted checkpoint")
		return false, nil
	})
	if err != nil || d.Action != ActionRestore || idOf(d.Checkpoint) != NewID(1) {
		t.Fatalf("second Recover = %+v, %v", d, err)
	}
}

func TestRecoverReportsPromotionFailure(t *testing.T) {
	fs := &faultyStorage{Storage: NewFileStorage(t.TempDir()), updateErr: errBoom}
	mustSave(t, fs, record(NewID(1), StatusPrepared))
	_, err := Recover(ctx, fs, func(context.Context, *CheckpointData) (bool, error) { return true, nil })
	if !errors.Is(err, errBoom) {
		t.Fatalf("err = %v, want promotion failure", err)
	}
}
