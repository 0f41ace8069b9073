package blobstorage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
)

// ErrPartMissing is returned (wrapped) by a Save of an assigned owner
// (see Storage.Assign) whose part is not in the store: never written, not
// yet written, written under another writer epoch, or written by a worker
// other than the one the assignment names (a replaced worker). Save then
// writes no record and moves no pointer.
var ErrPartMissing = errors.New("part missing: the assigned worker has not saved this owner under the current epoch")

// Assignment maps each owner (a key of checkpoint.CheckpointData.StateDirs)
// to the id of the worker that runs it (see ValidateWorkerID).
type Assignment map[string]string

// Validate checks every owner (one key segment, as
// checkpoint.ValidateStateDirs requires) and every worker id.
func (a Assignment) Validate() error {
	for _, owner := range sortedOwners(a) {
		if err := checkpoint.ValidateStateDirs(map[string]string{owner: "x"}); err != nil {
			return fmt.Errorf("assignment: %w", err)
		}
		if err := ValidateWorkerID(a[owner]); err != nil {
			return fmt.Errorf("assignment of owner %q: %w", owner, err)
		}
	}
	return nil
}

// Part is what a worker saved of one owner of one checkpoint: the part
// record Worker.SavePart writes, create-if-absent, at a key derived from
// (ID, Epoch, Owner, Worker) (see the package documentation).
type Part struct {
	// ID is the checkpoint the part belongs to.
	ID string `json:"id"`
	// Epoch is the writer epoch the worker was given for this checkpoint.
	Epoch uint64 `json:"epoch"`
	// Owner is the owner whose state the part holds.
	Owner string `json:"owner"`
	// Worker is the id of the worker that wrote the part.
	Worker string `json:"worker"`
	// Dir is the owner's state directory, relative to StateDir(ID)
	// (checkpoint.CheckpointData.StateDirs[Owner]).
	Dir string `json:"dir"`
	// Files are the owner's files, as in Record.Files.
	Files []FileRef `json:"files"`
	// Remote are the objects of the owner's state in remote mode, as in
	// Record.Remote (see Worker.UseRemote).
	Remote []RemoteRef `json:"remote,omitempty"`
	// Written is when the worker wrote the part (diagnostics).
	Written time.Time `json:"written"`
}

// Assign makes the following Saves take the state of every owner in a
// from the part its assigned worker saved under this Storage's epoch (one
// GET per owner, no LIST), instead of from the local disk. Owners of the
// saved checkpoint.CheckpointData not in a are saved from the local disk
// as without Assign. An owner of a that the saved data does not list in
// StateDirs is added to the record with the directory its part names; one
// it lists must name the same directory. A nil or empty a restores the
// behaviour without Assign. An invalid owner or worker id is an error,
// and the assignment in force is left unchanged.
func (s *Storage) Assign(a Assignment) error {
	if err := a.Validate(); err != nil {
		return fmt.Errorf("blobstorage: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.assign = maps.Clone(a)
	return nil
}

// assembleLocked starts the record of a Save of data: the files of the
// assigned owners come from their parts (read in parallel, one GET each),
// and local is data restricted to the owners the local disk holds.
func (s *Storage) assembleLocked(ctx context.Context, data *checkpoint.CheckpointData) (rec *Record, local *checkpoint.CheckpointData, err error) {
	rec = &Record{CheckpointData: data, Epoch: s.epoch, Files: map[string][]FileRef{}}
	a := s.assign
	if len(a) == 0 {
		return rec, data, nil
	}
	owners := sortedOwners(a)
	parts := make([]*Part, len(owners))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.opts.Concurrency)
	for i, owner := range owners {
		g.Go(func() (err error) {
			parts[i], err = s.readPart(gctx, data.ID, s.epoch, owner, a[owner])
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, nil, err
	}
	full := *data
	full.StateDirs = make(map[string]string, len(data.StateDirs)+len(a))
	localDirs := map[string]string{}
	for o, d := range data.StateDirs {
		full.StateDirs[o] = d
		if _, ok := a[o]; !ok {
			localDirs[o] = d
		}
	}
	for i, p := range parts {
		o := owners[i]
		if d, ok := full.StateDirs[o]; ok && d != p.Dir {
			return nil, nil, fmt.Errorf("owner %q: the checkpoint names state dir %q, the part of worker %q names %q", o, d, p.Worker, p.Dir)
		}
		full.StateDirs[o] = p.Dir
		rec.Files[o] = append([]FileRef{}, p.Files...)
		if len(p.Remote) > 0 {
			if rec.Remote == nil {
				rec.Remote = map[string][]RemoteRef{}
			}
			rec.Remote[o] = slices.Clone(p.Remote)
		}
	}
	if err := checkpoint.ValidateStateDirs(full.StateDirs); err != nil {
		return nil, nil, err
	}
	if err := s.checkReusedLocked(ctx, data.ID, rec.Files); err != nil {
		return nil, nil, err
	}
	rec.CheckpointData, rec.Workers = &full, maps.Clone(a)
	loc := full
	loc.StateDirs = localDirs
	return rec, &loc, nil
}

// readPart reads and checks the part of owner that worker saved for
// checkpoint id under epoch. An absent part wraps ErrPartMissing; a part
// that does not describe what its key says wraps ErrCorrupt.
func (s *Storage) readPart(ctx context.Context, id string, epoch uint64, owner, worker string) (*Part, error) {
	key := partKey(id, epoch, owner, worker)
	b, err := s.getBytes(ctx, key)
	if errors.Is(err, blobstore.ErrNotFound) {
		return nil, fmt.Errorf("owner %q: no part of worker %q under epoch %d (%s): %w", owner, worker, epoch, key, ErrPartMissing)
	}
	if err != nil {
		return nil, fmt.Errorf("owner %q: read part %s: %w", owner, key, err)
	}
	if err := checkPartBounds(b); err != nil {
		return nil, fmt.Errorf("%w: part %s: %w", ErrCorrupt, key, err)
	}
	var p Part
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("%w: part %s: %w", ErrCorrupt, key, err)
	}
	if p.ID != id || p.Epoch != epoch || p.Owner != owner || p.Worker != worker {
		return nil, fmt.Errorf("%w: part %s names checkpoint %q epoch %d owner %q worker %q", ErrCorrupt, key, p.ID, p.Epoch, p.Owner, p.Worker)
	}
	if err := checkpoint.ValidatePath(p.Dir); err != nil {
		return nil, fmt.Errorf("%w: part %s: %w", ErrCorrupt, key, err)
	}
	d := &checkpoint.CheckpointData{ID: id, StateDirs: map[string]string{owner: p.Dir}}
	if err := validateFiles(d, map[string][]FileRef{owner: p.Files}); err != nil {
		return nil, fmt.Errorf("%w: part %s: %w", ErrCorrupt, key, err)
	}
	if err := validateRemote(d, map[string][]RemoteRef{owner: p.Remote}); err != nil {
		return nil, fmt.Errorf("%w: part %s: %w", ErrCorrupt, key, err)
	}
	return &p, nil
}

// checkReusedLocked checks that every shared file the parts reference
// from earlier checkpoints still exists, unless a record this writer
// wrote under its epoch referenced it (then only this Storage's GC, which
// tells it, can have deleted it). A worker's cache does not hear of the
// writer's GC: this is where a file it deleted is caught, before a record
// names it.
func (s *Storage) checkReusedLocked(ctx context.Context, id string, files map[string][]FileRef) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.opts.Concurrency)
	for _, owner := range sortedOwners(files) {
		for _, f := range files[owner] {
			if introducedBy(f.Key, owner, id) || s.known[f.Key] == s.epoch {
				continue
			}
			g.Go(func() error {
				info, err := s.bs.Stat(gctx, f.Key)
				if errors.Is(err, blobstore.ErrNotFound) || (err == nil && info.Size != f.Size) {
					return fmt.Errorf("owner %q file %s: its part reuses %q, which is no longer in the store (deleted by GC): %w", owner, f.Path, f.Key, ErrPartMissing)
				}
				if err != nil {
					return fmt.Errorf("owner %q file %s: %w", owner, f.Path, err)
				}
				return nil
			})
		}
	}
	return g.Wait()
}

// noteCommittedLocked remembers the shared keys rec references as known
// to exist under this epoch (see checkReusedLocked).
func (s *Storage) noteCommittedLocked(rec *Record) {
	if s.known == nil {
		s.known = map[string]uint64{}
	}
	for _, files := range rec.Files {
		for _, f := range files {
			if isSharedKey(f.Key) {
				s.known[f.Key] = s.epoch
			}
		}
	}
}

// forgetKnownLocked forgets the keys GC deleted.
func (s *Storage) forgetKnownLocked(deleted map[string]bool) {
	for k := range deleted {
		delete(s.known, k)
	}
}

// only returns rec restricted to owners (a Worker's restore). An owner the
// checkpoint does not have is an error.
func (r *Record) only(owners []string) (*Record, error) {
	d := *r.CheckpointData
	d.StateDirs = make(map[string]string, len(owners))
	out := &Record{CheckpointData: &d, Epoch: r.Epoch, Files: make(map[string][]FileRef, len(owners)), Workers: r.Workers, EncryptionKeyID: r.EncryptionKeyID}
	for _, o := range owners {
		dir, ok := r.StateDirs[o]
		if !ok {
			return nil, fmt.Errorf("checkpoint %s has no state of owner %q", r.ID, o)
		}
		d.StateDirs[o] = dir
		if files, ok := r.Files[o]; ok {
			out.Files[o] = files
		}
		if refs, ok := r.Remote[o]; ok {
			if out.Remote == nil {
				out.Remote = map[string][]RemoteRef{}
			}
			out.Remote[o] = refs
		}
	}
	return out, nil
}
