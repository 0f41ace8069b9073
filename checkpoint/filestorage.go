package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/tidemark-io/tidemark/internal/fsync"
)

// Pointer file names in a FileStorage directory.
const (
	latestFile          = "latest.json"
	latestCompletedFile = "latest-completed.json"
	recordExt           = ".json"
)

// FileStorage implements Storage on a local filesystem directory:
//
//	<dir>/<id>.json              the record of checkpoint id
//	<dir>/<id>.state/<owner>/…   its native state directories
//	<dir>/latest.json            {"id": …} of the newest checkpoint, any status
//	<dir>/latest-completed.json  {"id": …} of the newest completed checkpoint
//
// Every file is written atomically and durably: temporary file in dir,
// write, fsync, rename, fsync dir. A record is durable before any pointer
// names it, so a crash leaves at worst a record no pointer names yet (it
// is overwritten when its id is reused, or ignored).
//
// Pointers only move forwards: a Save or UpdateStatus of an id older than
// the one a pointer names leaves the pointer alone.
//
// A FileStorage is safe for concurrent use within one process. Two
// processes must not write the same directory at once (there is no
// fencing here; the object-store Storage provides it).
type FileStorage struct {
	dir string
	mu  sync.Mutex // serializes writes so pointer compare-and-move is atomic
}

var _ Storage = (*FileStorage)(nil)

// NewFileStorage creates a FileStorage that keeps checkpoints in dir. The
// directory is created on the first write; reading a directory that does
// not exist finds no checkpoint. On startup, call SweepOrphans to clean up
// state directories from failed checkpoints. Under package job, a
// subdirectory of job.Config.Dir such as Dir/checkpoints will do; never
// Dir/live, which the runtime clears at start.
func NewFileStorage(dir string) *FileStorage {
	return &FileStorage{dir: dir}
}

// Dir returns the directory the storage was created with.
func (s *FileStorage) Dir() string { return s.dir }

// StateDir returns dir/<id>.state, the parent of every per-owner state
// directory of checkpoint id. It returns "" for an id that ValidateID
// rejects, so that no path outside dir can be formed.
func (s *FileStorage) StateDir(id string) string {
	if ValidateID(id) != nil {
		return ""
	}
	return filepath.Join(s.dir, id+stateExt)
}

// pointer is the content of latest.json and latest-completed.json.
type pointer struct {
	ID string `json:"id"`
}

// Save writes data as <id>.json atomically and durably, then moves
// latest.json (and, for a completed checkpoint, latest-completed.json)
// forward to it if its id is newer than the one they name. The record
// carries the job id JobToSave gives (data is not changed).
func (s *FileStorage) Save(ctx context.Context, data *CheckpointData) error {
	if err := ValidateRecord(data); err != nil {
		return fmt.Errorf("checkpoint: save: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return fmt.Errorf("checkpoint: save %q: %w", data.ID, err)
	}
	latest, err := s.loadPointer(ctx, latestFile)
	if err != nil {
		return fmt.Errorf("checkpoint: save %q: %w", data.ID, err)
	}
	job, err := JobToSave(data, latest)
	if err != nil {
		return fmt.Errorf("checkpoint: save %q: %w", data.ID, err)
	}
	return s.writeRecordLocked(ctx, withJob(data, job))
}

// writeRecordLocked writes the record and then the pointers. The order is
// the point: a pointer must never name a record that is not yet durable.
func (s *FileStorage) writeRecordLocked(ctx context.Context, data *CheckpointData) error {
	b, err := marshalRecord(data)
	if err != nil {
		return err
	}
	// Write nothing that a read would refuse: the store would be stuck.
	if err := CheckRecordBounds(b); err != nil {
		return fmt.Errorf("checkpoint: save %q: %w", data.ID, err)
	}
	if err := writeFileAtomic(ctx, s.dir, data.ID+recordExt, b); err != nil {
		return fmt.Errorf("checkpoint: save %q: %w", data.ID, err)
	}
	if err := s.advanceLocked(ctx, latestFile, data.ID); err != nil {
		return fmt.Errorf("checkpoint: save %q: %w", data.ID, err)
	}
	if data.Completed() {
		if err := s.advanceLocked(ctx, latestCompletedFile, data.ID); err != nil {
			return fmt.Errorf("checkpoint: save %q: %w", data.ID, err)
		}
	}
	return nil
}

// advanceLocked points name at id unless it already names an id at least
// as new: pointers never move backwards.
func (s *FileStorage) advanceLocked(ctx context.Context, name, id string) error {
	cur, err := s.readPointer(name)
	if err != nil {
		return err
	}
	if cur != "" && cur >= id {
		return nil
	}
	b, err := json.Marshal(pointer{ID: id})
	if err != nil {
		return err
	}
	return writeFileAtomic(ctx, s.dir, name, append(b, '\n'))
}

// readPointer returns the id a pointer names, or "" when the pointer does
// not exist.
func (s *FileStorage) readPointer(name string) (string, error) {
	b, err := os.ReadFile(filepath.Join(s.dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read pointer %s: %w", name, err)
	}
	var p pointer
	if err := json.Unmarshal(b, &p); err != nil {
		return "", fmt.Errorf("read pointer %s: %w", name, err)
	}
	if err := ValidateID(p.ID); err != nil {
		return "", fmt.Errorf("read pointer %s: %w", name, err)
	}
	return p.ID, nil
}

// Load reads the most recent checkpoint of any status, or nil with no
// error when there is none.
func (s *FileStorage) Load(ctx context.Context) (*CheckpointData, error) {
	return s.loadPointer(ctx, latestFile)
}

// LoadLatestCompleted reads the most recent completed checkpoint, or nil
// with no error when there is none.
func (s *FileStorage) LoadLatestCompleted(ctx context.Context) (*CheckpointData, error) {
	return s.loadPointer(ctx, latestCompletedFile)
}

func (s *FileStorage) loadPointer(ctx context.Context, name string) (*CheckpointData, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("checkpoint: load %s: %w", name, err)
	}
	id, err := s.readPointer(name)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: load: %w", err)
	}
	if id == "" {
		return nil, nil
	}
	d, err := s.readRecord(id)
	if err != nil {
		// A pointer names only durable records, so a missing one means the
		// directory was tampered with: say so rather than report "none".
		return nil, fmt.Errorf("checkpoint: load %s: %w", name, err)
	}
	return d, nil
}

// LoadSpecific reads checkpoint id; a missing record wraps ErrNotFound.
func (s *FileStorage) LoadSpecific(ctx context.Context, id string) (*CheckpointData, error) {
	if err := ValidateID(id); err != nil {
		return nil, fmt.Errorf("checkpoint: load %q: %w", id, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("checkpoint: load %q: %w", id, err)
	}
	d, err := s.readRecord(id)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: load: %w", err)
	}
	return d, nil
}

func (s *FileStorage) readRecord(id string) (*CheckpointData, error) {
	b, err := readFileBounded(filepath.Join(s.dir, id+recordExt))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%q: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("%q: %w", id, err)
	}
	d, err := DecodeRecord(b)
	if err != nil {
		return nil, fmt.Errorf("%q: %w", id, err)
	}
	if d.ID != id {
		return nil, fmt.Errorf("%q: record names id %q", id, d.ID)
	}
	return d, nil
}

// UpdateStatus rewrites checkpoint id with a new status, atomically and
// durably, and moves the pointers forward as Save does. A missing record
// wraps ErrNotFound.
func (s *FileStorage) UpdateStatus(ctx context.Context, id string, status Status) error {
	if err := ValidateStatusUpdate(id, status); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d, err := s.readRecord(id)
	if err != nil {
		return fmt.Errorf("checkpoint: update status: %w", err)
	}
	d.Status = status
	return s.writeRecordLocked(ctx, d)
}

// SweepOrphans deletes every <id>.state directory whose record <id>.json
// does not exist — state written by a checkpoint that crashed before its
// record was saved, or left by an interrupted extraction — and temporary
// files left by interrupted writes. Call it once at startup, before any
// pipeline runs: it would delete the state of a checkpoint being taken.
func (s *FileStorage) SweepOrphans(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	entries, err := os.ReadDir(s.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("checkpoint: sweep %s: %w", s.dir, err)
	}
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("checkpoint: sweep %s: %w", s.dir, err)
		}
		name := e.Name()
		var orphan bool
		switch {
		case strings.HasPrefix(name, ".") && strings.Contains(name, tempMarker):
			orphan = true
		case e.IsDir() && strings.HasSuffix(name, stateExt):
			id := strings.TrimSuffix(name, stateExt)
			_, err := os.Stat(filepath.Join(s.dir, id+recordExt))
			switch {
			case errors.Is(err, fs.ErrNotExist):
				orphan = true
			case err != nil:
				return fmt.Errorf("checkpoint: sweep %s: %w", s.dir, err)
			}
		}
		if orphan {
			if err := os.RemoveAll(filepath.Join(s.dir, name)); err != nil {
				return fmt.Errorf("checkpoint: sweep %s: %w", s.dir, err)
			}
		}
	}
	return nil
}

// DeleteStateDirs removes the state directories of checkpoint id (its
// whole StateDir). Used during retention/GC. Removing state that does not
// exist succeeds.
func (s *FileStorage) DeleteStateDirs(ctx context.Context, id string) error {
	if err := ValidateID(id); err != nil {
		return fmt.Errorf("checkpoint: delete state %q: %w", id, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("checkpoint: delete state %q: %w", id, err)
	}
	if err := os.RemoveAll(s.StateDir(id)); err != nil {
		return fmt.Errorf("checkpoint: delete state %q: %w", id, err)
	}
	return nil
}

// writeFileAtomic replaces dir/name with data so that a crash at any point
// leaves either the old or the new content, never a mix: write a temporary
// file in the same directory, fsync it (so the rename cannot become
// durable before the data), rename it over the target, then fsync the
// directory (so the rename itself survives a crash).
func writeFileAtomic(ctx context.Context, dir, name string, data []byte) (err error) {
	if err := ctx.Err(); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, TempPattern(name))
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return err
	}
	return fsync.Dir(dir)
}

// readFileBounded reads a record file, refusing one over MaxRecordBytes
// before holding more than that.
func readFileBounded(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadRecordBytes(f)
}
