package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"testing"
)

var ctx = context.Background()

func TestFileStorageLoadOnMissingDirFindsNothing(t *testing.T) {
	s := NewFileStorage(filepath.Join(t.TempDir(), "absent"))
	for name, load := range map[string]func(context.Context) (*CheckpointData, error){
		"Load": s.Load, "LoadLatestCompleted": s.LoadLatestCompleted,
	} {
		d, err := load(ctx)
		if d != nil || err != nil {
			t.Errorf("%s = %v, %v; want nil, nil", name, d, err)
		}
	}
}

func TestFileStorageSaveThenLoadRoundTripsEveryField(t *testing.T) {
	s := NewFileStorage(t.TempDir())
	want := record(NewID(1), StatusCompleted)
	want.StateDirs = map[string]string{"w0": "w0", "w1": "nested/w1"}
	mustSave(t, s, want)
	for name, load := range map[string]func(context.Context) (*CheckpointData, error){
		"Load": s.Load, "LoadLatestCompleted": s.LoadLatestCompleted,
		"LoadSpecific": func(ctx context.Context) (*CheckpointData, error) { return s.LoadSpecific(ctx, want.ID) },
	} {
		got, err := load(ctx)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %+v, want %+v", name, got, want)
		}
	}
}

func TestFileStorageLatestIsNewestOfAnyStatus(t *testing.T) {
	s := NewFileStorage(t.TempDir())
	mustSave(t, s, record(NewID(1), StatusCompleted))
	mustSave(t, s, record(NewID(2), StatusPrepared))
	latest, err := s.Load(ctx)
	if err != nil || idOf(latest) != NewID(2) {
		t.Fatalf("Load = %s, %v; want %s", idOf(latest), err, NewID(2))
	}
	done, err := s.LoadLatestCompleted(ctx)
	if err != nil || idOf(done) != NewID(1) {
		t.Fatalf("LoadLatestCompleted = %s, %v; want %s", idOf(done), err, NewID(1))
	}
}

func TestFileStorageLatestCompletedIsNilWhenOnlyPrepared(t *testing.T) {
	s := NewFileStorage(t.TempDir())
	mustSave(t, s, record(NewID(1), StatusPrepared))
	d, err := s.LoadLatestCompleted(ctx)
	if d != nil || err != nil {
		t.Fatalf("LoadLatestCompleted = %v, %v; want nil, nil", d, err)
	}
}

func TestFileStorageEmptyStatusCountsAsCompleted(t *testing.T) {
	s := NewFileStorage(t.TempDir())
	mustSave(t, s, record(NewID(1), ""))
	d, err := s.LoadLatestCompleted(ctx)
	if err != nil || idOf(d) != NewID(1) {
		t.Fatalf("LoadLatestCompleted = %s, %v", idOf(d), err)
	}
}

func TestFileStoragePointersNeverMoveBackwards(t *testing.T) {
	s := NewFileStorage(t.TempDir())
	mustSave(t, s, record(NewID(1), StatusPrepared))
	mustSave(t, s, record(NewID(3), StatusCompleted))
	mustSave(t, s, record(NewID(2), StatusCompleted)) // older, saved late
	if err := s.UpdateStatus(ctx, NewID(1), StatusCompleted); err != nil {
		t.Fatal(err)
	}
	latest, _ := s.Load(ctx)
	done, _ := s.LoadLatestCompleted(ctx)
	if idOf(latest) != NewID(3) || idOf(done) != NewID(3) {
		t.Fatalf("latest = %s, latest completed = %s; want both %s", idOf(latest), idOf(done), NewID(3))
	}
}

func TestFileStorageUpdateStatusPromotesAndMovesLatestCompleted(t *testing.T) {
	s := NewFileStorage(t.TempDir())
	mustSave(t, s, record(NewID(1), StatusCompleted))
	mustSave(t, s, record(NewID(2), StatusPrepared))
	if err := s.UpdateStatus(ctx, NewID(2), StatusCompleted); err != nil {
		t.Fatal(err)
	}
	d, err := s.LoadLatestCompleted(ctx)
	if err != nil || idOf(d) != NewID(2) || d.Status != StatusCompleted {
		t.Fatalf("LoadLatestCompleted = %+v, %v", d, err)
	}
	want := record(NewID(2), StatusCompleted)
	if !reflect.DeepEqual(d, want) {
		t.Fatalf("promotion changed more than the status: %+v", d)
	}
}

func TestFileStorageMissingCheckpointIsErrNotFound(t *testing.T) {
	s := NewFileStorage(t.TempDir())
	mustSave(t, s, record(NewID(1), StatusCompleted))
	if _, err := s.LoadSpecific(ctx, NewID(9)); !errors.Is(err, ErrNotFound) {
		t.Errorf("LoadSpecific missing: %v, want ErrNotFound", err)
	}
	if err := s.UpdateStatus(ctx, NewID(9), StatusCompleted); !errors.Is(err, ErrNotFound) {
		t.Errorf("UpdateStatus missing: %v, want ErrNotFound", err)
	}
}

func TestFileStorageRejectsInvalidIDs(t *testing.T) {
	dir := t.TempDir()
	s := NewFileStorage(filepath.Join(dir, "ckpt"))
	for _, id := range []string{"", "a/b", "..", "../../escape", `a\b`, ".tmp", "latest", "latest-completed"} {
		t.Run(fmt.Sprintf("%q", id), func(t *testing.T) {
			if err := s.Save(ctx, record(id, StatusCompleted)); !errors.Is(err, ErrInvalidID) {
				t.Errorf("Save: %v", err)
			}
			if _, err := s.LoadSpecific(ctx, id); !errors.Is(err, ErrInvalidID) {
				t.Errorf("LoadSpecific: %v", err)
			}
			if err := s.UpdateStatus(ctx, id, StatusCompleted); !errors.Is(err, ErrInvalidID) {
				t.Errorf("UpdateStatus: %v", err)
			}
			if err := s.DeleteStateDirs(ctx, id); !errors.Is(err, ErrInvalidID) {
				t.Errorf("DeleteStateDirs: %v", err)
			}
			if got := s.StateDir(id); got != "" {
				t.Errorf("StateDir = %q, want \"\"", got)
			}
		})
	}
	// Nothing may have been written anywhere, least of all outside dir/ckpt.
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() != "ckpt" {
			t.Errorf("unexpected entry %s outside the storage dir", e.Name())
		}
	}
}

func TestFileStorageRejectsUnknownStatus(t *testing.T) {
	s := NewFileStorage(t.TempDir())
	if err := s.Save(ctx, record(NewID(1), "half")); err == nil {
		t.Error("Save accepted an unknown status")
	}
	mustSave(t, s, record(NewID(1), StatusPrepared))
	if err := s.UpdateStatus(ctx, NewID(1), "half"); err == nil {
		t.Error("UpdateStatus accepted an unknown status")
	}
}

func TestFileStorageLeavesOnlyRecordsAndPointers(t *testing.T) {
	dir := t.TempDir()
	s := NewFileStorage(dir)
	mustSave(t, s, record(NewID(1), StatusPrepared))
	if err := s.UpdateStatus(ctx, NewID(1), StatusCompleted); err != nil {
		t.Fatal(err)
	}
	mustSave(t, s, record(NewID(2), StatusPrepared))
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	want := []string{NewID(1) + ".json", NewID(2) + ".json", "latest-completed.json", "latest.json"}
	if !slices.Equal(names, want) {
		t.Fatalf("dir holds %q, want %q (no temporary files)", names, want)
	}
}

func TestFileStorageSaveHonoursCancelledContext(t *testing.T) {
	s := NewFileStorage(t.TempDir())
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.Save(cctx, record(NewID(1), StatusCompleted)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Save with cancelled ctx: %v", err)
	}
	if d, _ := s.Load(ctx); d != nil {
		t.Fatalf("a cancelled Save left %s behind", d.ID)
	}
}

func TestFileStorageLoadReportsPointerToMissingRecord(t *testing.T) {
	dir := t.TempDir()
	s := NewFileStorage(dir)
	mustSave(t, s, record(NewID(1), StatusCompleted))
	if err := os.Remove(filepath.Join(dir, NewID(1)+".json")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(ctx); err == nil {
		t.Fatal("Load hid a dangling pointer")
	}
}

func TestFileStorageConcurrentSavesKeepNewestPointers(t *testing.T) {
	s := NewFileStorage(t.TempDir())
	var wg sync.WaitGroup
	for i := 1; i <= 20; i++ {
		wg.Go(func() {
			if err := s.Save(ctx, record(NewID(uint64(i)), StatusCompleted)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	latest, _ := s.Load(ctx)
	done, _ := s.LoadLatestCompleted(ctx)
	if idOf(latest) != NewID(20) || idOf(done) != NewID(20) {
		t.Fatalf("latest = %s, completed = %s; want %s", idOf(latest), idOf(done), NewID(20))
	}
}

func TestFileStorageStateDirIsIDDotStateInDir(t *testing.T) {
	dir := t.TempDir()
	s := NewFileStorage(dir)
	if got, want := s.StateDir(NewID(4)), filepath.Join(dir, NewID(4)+".state"); got != want {
		t.Fatalf("StateDir = %q, want %q", got, want)
	}
}

func TestSweepOrphansRemovesStateWithoutRecordAndKeepsTheRest(t *testing.T) {
	dir := t.TempDir()
	s := NewFileStorage(dir)
	mustSave(t, s, record(NewID(1), StatusCompleted))
	for _, id := range []string{NewID(1), NewID(2)} {
		if err := os.MkdirAll(filepath.Join(s.StateDir(id), "w0"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(s.StateDir(id), "w0", "000001.sst"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tmp := filepath.Join(dir, ".latest.json"+tempMarker+"123")
	if err := os.WriteFile(tmp, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.SweepOrphans(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.StateDir(NewID(1))); err != nil {
		t.Errorf("state of a recorded checkpoint was swept: %v", err)
	}
	if _, err := os.Stat(s.StateDir(NewID(2))); !os.IsNotExist(err) {
		t.Errorf("orphan state survived: %v", err)
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Errorf("temporary file survived: %v", err)
	}
	if d, err := s.Load(ctx); err != nil || idOf(d) != NewID(1) {
		t.Errorf("sweep damaged the storage: %s, %v", idOf(d), err)
	}
}

func TestSweepOrphansOnMissingDirSucceeds(t *testing.T) {
	if err := NewFileStorage(filepath.Join(t.TempDir(), "none")).SweepOrphans(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestDeleteStateDirsRemovesOnlyThatCheckpointsState(t *testing.T) {
	s := NewFileStorage(t.TempDir())
	for _, id := range []string{NewID(1), NewID(2)} {
		if err := os.MkdirAll(filepath.Join(s.StateDir(id), "w0"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteStateDirs(ctx, NewID(1)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.StateDir(NewID(1))); !os.IsNotExist(err) {
		t.Errorf("state of %s survived: %v", NewID(1), err)
	}
	if _, err := os.Stat(s.StateDir(NewID(2))); err != nil {
		t.Errorf("state of %s removed: %v", NewID(2), err)
	}
	if err := s.DeleteStateDirs(ctx, NewID(1)); err != nil {
		t.Errorf("second delete: %v", err)
	}
}
