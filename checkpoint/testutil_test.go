package checkpoint

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// record is a completed-or-prepared record with the fields tests compare,
// of job "job-test" (so that a Save stamps nothing on it).
func record(id string, status Status) *CheckpointData {
	return &CheckpointData{
		JobID:     "job-test",
		ID:        id,
		Timestamp: time.Date(2026, 7, 19, 10, 0, 0, 0, time.UTC),
		Operators: map[string][]byte{"0": []byte("op-" + id)},
		Source:    map[string][]byte{SourceOffsetsKey: []byte("off-" + id)},
		Status:    status,
		TxnID:     "txn",
	}
}

func mustSave(t testing.TB, s Storage, d *CheckpointData) {
	t.Helper()
	if err := s.Save(t.Context(), d); err != nil {
		t.Fatalf("Save(%s): %v", d.ID, err)
	}
}

func idOf(d *CheckpointData) string {
	if d == nil {
		return "<nil>"
	}
	return d.ID
}

// faultyStorage wraps a Storage and fails chosen operations.
type faultyStorage struct {
	Storage
	mu        sync.Mutex
	saveErr   error
	updateErr error
	saves     []string
	updates   []string
}

func (f *faultyStorage) Save(ctx context.Context, d *CheckpointData) error {
	f.mu.Lock()
	f.saves = append(f.saves, d.ID)
	err := f.saveErr
	f.mu.Unlock()
	if err != nil {
		return err
	}
	return f.Storage.Save(ctx, d)
}

func (f *faultyStorage) UpdateStatus(ctx context.Context, id string, st Status) error {
	f.mu.Lock()
	f.updates = append(f.updates, id)
	err := f.updateErr
	f.mu.Unlock()
	if err != nil {
		return err
	}
	return f.Storage.UpdateStatus(ctx, id, st)
}

var errBoom = errors.New("boom")

// waitFor fails the test if ch does not yield within a generous timeout.
func waitFor[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}
