package state

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/tidemark-io/tidemark/internal/fsync"
)

// Checkpoint takes a native Pebble checkpoint of every owner into
// dir/<owner> and returns owner id → path relative to dir (the owner id
// itself), which is what checkpoint.CheckpointData.StateDirs holds.
//
// dir may exist but must not contain an entry named like an owner, and
// must lie outside the store directory (fs.ErrInvalid otherwise). SSTs
// are hard-linked (copied across filesystems), the MANIFEST, OPTIONS and
// WAL are copied, and all of it is durable when Checkpoint returns: Pebble
// fsyncs every file it copies and each owner directory, fsync.MkdirAll
// fsyncs the parents of dir it creates, and dir itself is fsynced last so
// that the owner entries are durable whatever Pebble does internally.
//
// Writes committed before the call are in the checkpoint
// (pebble.WithFlushedWAL). Writes concurrent with it may or may not be,
// owner by owner. On error, or when ctx is cancelled between owners, the
// owner directories created so far are removed.
func (s *Store) Checkpoint(ctx context.Context, dir string) (map[string]string, error) {
	if err := s.acquire(); err != nil {
		return nil, fmt.Errorf("state: checkpoint %q: %w", dir, err)
	}
	defer s.release()
	// A checkpoint inside the store directory would be taken for an owner
	// (and opened as an empty database) the next time the store opens.
	if inside, err := within(s.dir, dir); err != nil {
		return nil, fmt.Errorf("state: checkpoint %q: %w", dir, err)
	} else if inside {
		return nil, fmt.Errorf("state: checkpoint %q: inside the store directory %q: %w", dir, s.dir, fs.ErrInvalid)
	}

	s.mu.Lock()
	owners := make([]*Owner, 0, len(s.owners))
	for _, id := range slices.Sorted(maps.Keys(s.owners)) {
		owners = append(owners, s.owners[id])
	}
	s.mu.Unlock()

	if err := fsync.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("state: checkpoint %q: %w", dir, err)
	}
	var created []string
	fail := func(err error) (map[string]string, error) {
		for _, p := range created {
			_ = os.RemoveAll(p)
		}
		return nil, err
	}
	out := make(map[string]string, len(owners))
	for _, o := range owners {
		if err := ctx.Err(); err != nil {
			return fail(fmt.Errorf("state: checkpoint %q: %w", dir, err))
		}
		if !s.opts.NoFlushOnCheckpoint {
			// Move the memtable into an SST so the delta since the last
			// checkpoint is in immutable, shareable files rather than in
			// the private WAL copy.
			if err := s.flush(ctx, o); err != nil {
				return fail(fmt.Errorf("state: checkpoint %q: owner %q: flush: %w", dir, o.id, err))
			}
		}
		dst := filepath.Join(dir, o.id)
		if err := o.db.Checkpoint(dst, pebble.WithFlushedWAL()); err != nil {
			// Pebble removes its own partial directory on error.
			return fail(fmt.Errorf("state: checkpoint %q: owner %q: %w", dir, o.id, err))
		}
		created = append(created, dst)
		out[o.id] = o.id
	}
	if err := fsync.Dir(dir); err != nil {
		return fail(fmt.Errorf("state: checkpoint %q: %w", dir, err))
	}
	return out, nil
}

// OpenCheckpoint opens a Store from a checkpoint directory srcDir (as
// written by Store.Checkpoint, or restored from an object store: one
// subdirectory per owner). Pebble writes into the directory it opens, so
// srcDir is first materialized into workDir, which must not exist or be
// empty: SSTs and blob files are hard-linked (Pebble never modifies them,
// it only unlinks them), everything else is copied. The private files are
// small, and a copy keeps the checkpoint safe from in-place reuse of a
// file (Pebble's WAL recycling overwrites an old WAL; this package turns
// recycling off, but the copy does not depend on that). srcDir is left
// unchanged and can be opened again.
//
// The copy is built in a temporary sibling of workDir, fsynced, and renamed
// into place, so workDir either appears complete or not at all; a crash
// may leave a ".<name>.restore-*" sibling behind.
func OpenCheckpoint(ctx context.Context, srcDir, workDir string, opts Options) (*Store, error) {
	if err := materialize(ctx, srcDir, workDir); err != nil {
		return nil, fmt.Errorf("state: open checkpoint %q in %q: %w", srcDir, workDir, err)
	}
	return Open(workDir, opts)
}

func materialize(ctx context.Context, srcDir, workDir string) error {
	files, err := ListFiles(srcDir)
	if err != nil {
		return err
	}
	owners := map[string]bool{}
	for _, f := range files {
		owner, _, ok := strings.Cut(f.RelPath, "/")
		if !ok {
			return fmt.Errorf("%q is outside every owner directory: %w", f.RelPath, ErrUnsupportedFile)
		}
		if err := ValidateOwnerID(owner); err != nil {
			return err
		}
		owners[owner] = true
	}
	if entries, err := os.ReadDir(workDir); err == nil && len(entries) > 0 {
		return fmt.Errorf("%q is not empty: %w", workDir, fs.ErrExist)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}

	parent := filepath.Dir(filepath.Clean(workDir))
	if err := fsync.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(workDir)+".restore-*")
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			_ = os.RemoveAll(tmp)
		}
	}()

	dirs := map[string]bool{tmp: true}
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return err
		}
		src := filepath.Join(srcDir, filepath.FromSlash(f.RelPath))
		dst := filepath.Join(tmp, filepath.FromSlash(f.RelPath))
		for d := filepath.Dir(dst); !dirs[d]; d = filepath.Dir(d) {
			dirs[d] = true
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if f.Kind == Immutable {
			// A hard link shares the inode with the checkpoint; safe
			// because Pebble never writes to an existing SST or blob
			// file. Fall back to a copy across filesystems.
			if err := os.Link(src, dst); err == nil {
				continue
			}
		}
		if err := copyFile(src, dst); err != nil {
			return err
		}
	}
	// A remote-mode database's catalog marker must not let Pebble's next
	// catalog take the current one's name (catalog.go).
	for owner := range owners {
		if err := alignCatalogMarker(filepath.Join(tmp, owner)); err != nil {
			return err
		}
	}
	// Every directory we created holds new entries: fsync them all, the
	// deepest first, before the rename publishes the tree.
	ds := slices.Collect(maps.Keys(dirs))
	slices.SortFunc(ds, func(a, b string) int { return len(b) - len(a) })
	for _, d := range ds {
		if err := fsync.Dir(d); err != nil {
			return err
		}
	}
	// os.Rename refuses an existing directory, so remove the empty workDir
	// first; os.Remove fails on a non-empty one, so anything written into
	// workDir meanwhile is never clobbered.
	if err := os.Remove(workDir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.Rename(tmp, workDir); err != nil {
		return err
	}
	done = true
	return fsync.Dir(parent)
}

// within reports whether path is root or lies under it (lexically, after
// making both absolute).
func within(root, path string) (bool, error) {
	r, err := filepath.Abs(root)
	if err != nil {
		return false, err
	}
	p, err := filepath.Abs(path)
	if err != nil {
		return false, err
	}
	rel, err := filepath.Rel(r, p)
	if err != nil {
		return false, nil
	}
	return rel == "." || (rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))), nil
}
