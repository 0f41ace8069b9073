package checkpoint

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tidemark-io/tidemark/archive"
	"github.com/tidemark-io/tidemark/internal/fsync"
)

// archiveSource is implemented by a Storage that can serve a checkpoint's
// files for ArchiveCheckpoint without a local copy of its state
// directories. blobstorage.Storage does, streaming them from the store
// with the digests its record already holds.
type archiveSource interface {
	ArchiveFiles(ctx context.Context, id string) ([]archive.File, archive.OpenFunc, error)
}

// ArchiveCheckpoint writes a self-contained archive (package archive) of
// checkpoint id — its JSON record plus a real copy of every per-owner
// state directory, as state/<owner>/… — to w. Unlike the live checkpoint
// (Pebble hard-links on one filesystem), the archive is portable: it can be
// moved to another volume, host, or object store and extracted anywhere.
//
// Only completed checkpoints are archived: extraction makes the archive a
// completed checkpoint, so archiving a prepared one would claim a commit
// nobody proved. Owner ids must be single key segments and state paths
// must stay inside src.StateDir(id).
func ArchiveCheckpoint(ctx context.Context, src Storage, id string, w io.Writer) error {
	cp, err := src.LoadSpecific(ctx, id)
	if err != nil {
		return fmt.Errorf("checkpoint: archive: %w", err)
	}
	if !cp.Completed() {
		return fmt.Errorf("checkpoint: archive %q: status %q is not completed", id, cp.Status)
	}
	if err := ValidateStateDirs(cp.StateDirs); err != nil {
		return fmt.Errorf("checkpoint: archive %q: %w", id, err)
	}
	rec, err := json.Marshal(cp)
	if err != nil {
		return fmt.Errorf("checkpoint: archive %q: %w", id, err)
	}
	m := &archive.Manifest{Version: archive.FormatVersion, Record: rec}
	if as, ok := src.(archiveSource); ok { // BlobStorage: stream from the store, no local copy needed
		files, open, err := as.ArchiveFiles(ctx, id)
		if err != nil {
			return fmt.Errorf("checkpoint: archive %q: %w", id, err)
		}
		m.Files = files
		if err := archive.Write(ctx, w, m, open, archive.WriteOptions{}); err != nil {
			return fmt.Errorf("checkpoint: archive %q: %w", id, err)
		}
		return nil
	}
	openers := map[string]archive.OpenFunc{}
	owners := slices.Sorted(maps.Keys(cp.StateDirs))
	for _, owner := range owners {
		dir := filepath.Join(src.StateDir(id), filepath.FromSlash(cp.StateDirs[owner]))
		prefix := archive.StatePrefix + owner
		files, err := archive.DirFiles(ctx, dir, prefix)
		if err != nil {
			return fmt.Errorf("checkpoint: archive %q: owner %q: %w", id, owner, err)
		}
		m.Files = append(m.Files, files...)
		openers[owner] = archive.DirOpener(dir, prefix)
	}
	open := func(ctx context.Context, p string) (io.ReadCloser, error) {
		owner, _, _ := strings.Cut(strings.TrimPrefix(p, archive.StatePrefix), "/")
		o, ok := openers[owner]
		if !ok {
			return nil, fmt.Errorf("no owner for %q: %w", p, fs.ErrNotExist)
		}
		return o(ctx, p)
	}
	if err := archive.Write(ctx, w, m, open, archive.WriteOptions{}); err != nil {
		return fmt.Errorf("checkpoint: archive %q: %w", id, err)
	}
	return nil
}

// ExtractCheckpoint reads an archive produced by ArchiveCheckpoint and
// materializes it into dst as a completed checkpoint: state files are
// written under dst.StateDir(id) and the record is saved (status
// completed) so that dst.LoadLatestCompleted returns it. Returns the
// checkpoint ID.
//
// The archive is verified completely (every size and digest) into a
// staging directory next to the state directories before anything is
// moved into place or any record is saved, so a damaged or hostile
// archive (errors wrap archive.ErrCorrupt) leaves dst as it was.
//
// Onto a Storage whose checkpoints are all older (a fresh one, another
// region's), the checkpoint keeps its id. Onto one that holds a checkpoint
// at least as new — rolling a job back to the savepoint it took before an
// upgrade — it starts a new lineage, as restoring a Flink savepoint does:
// it becomes the latest completed checkpoint under a fresh id after every
// existing one (the pointers never move backwards), and records the id it
// was restored from under RestoredFromKey in Source. The newer checkpoints
// stay until retention drops them. The returned id is the one dst holds.
//
// A staging directory left by a crash is named like an orphan state
// directory, so FileStorage.SweepOrphans removes it.
func ExtractCheckpoint(ctx context.Context, dst Storage, r io.Reader) (string, error) {
	// StateDir of any id names a sibling of every state directory: stage
	// there so that moving into place is a rename on one filesystem.
	parent := filepath.Dir(dst.StateDir(NewID(0)))
	staging := filepath.Join(parent, "extract-"+randomHex()+stateExt)
	defer os.RemoveAll(staging)

	m, err := archive.ExtractDir(ctx, r, staging, archive.Limits{})
	if err != nil {
		return "", fmt.Errorf("checkpoint: extract: %w", err)
	}
	cp, err := DecodeRecord(m.Record)
	if err != nil {
		return "", fmt.Errorf("checkpoint: extract: %w: %w", archive.ErrCorrupt, err)
	}
	id := cp.ID
	if !cp.Completed() {
		return "", fmt.Errorf("checkpoint: extract %q: %w: status %q is not completed", id, archive.ErrCorrupt, cp.Status)
	}
	if err := ValidateStateDirs(cp.StateDirs); err != nil {
		return "", fmt.Errorf("checkpoint: extract %q: %w: %w", id, archive.ErrCorrupt, err)
	}
	for _, f := range m.Files {
		owner, _, _ := strings.Cut(strings.TrimPrefix(f.Path, archive.StatePrefix), "/")
		if _, ok := cp.StateDirs[owner]; !ok {
			return "", fmt.Errorf("checkpoint: extract %q: %w: file %q belongs to no owner of the record", id, archive.ErrCorrupt, f.Path)
		}
	}

	latest, err := dst.Load(ctx)
	if err != nil {
		return "", fmt.Errorf("checkpoint: extract %q: %w", id, err)
	}
	if latest != nil && latest.ID >= id {
		// A rollback: a new lineage after every existing checkpoint.
		next, err := NextID(latest.ID)
		if err != nil {
			return "", fmt.Errorf("checkpoint: extract %q: %w", id, err)
		}
		source := maps.Clone(cp.Source)
		if source == nil {
			source = map[string][]byte{}
		}
		source[RestoredFromKey] = []byte(id)
		cp.Source, cp.ID, id = source, next, next
	}

	stateDir := dst.StateDir(id)
	// Anything already there belongs to no record (dst has nothing this
	// new): it is an orphan of a crashed checkpoint or extraction.
	if err := os.RemoveAll(stateDir); err != nil {
		return "", fmt.Errorf("checkpoint: extract %q: %w", id, err)
	}
	// Created even with no owner: a checkpoint without state has a state
	// directory too, as Save leaves it.
	if err := os.Mkdir(stateDir, 0o755); err != nil {
		return "", fmt.Errorf("checkpoint: extract %q: %w", id, err)
	}
	for _, owner := range slices.Sorted(maps.Keys(cp.StateDirs)) {
		to := filepath.Join(stateDir, filepath.FromSlash(cp.StateDirs[owner]))
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return "", fmt.Errorf("checkpoint: extract %q: %w", id, err)
		}
		from := filepath.Join(staging, filepath.FromSlash(archive.StatePrefix+owner))
		err := os.Rename(from, to)
		if errors.Is(err, fs.ErrNotExist) {
			err = os.Mkdir(to, 0o755) // an owner whose state dir was empty
		}
		if err != nil {
			return "", fmt.Errorf("checkpoint: extract %q: %w", id, err)
		}
	}
	// The state must be durable before the record that names it.
	if err := fsync.Tree(stateDir); err != nil {
		return "", fmt.Errorf("checkpoint: extract %q: %w", id, err)
	}
	if err := fsync.Dir(parent); err != nil {
		return "", fmt.Errorf("checkpoint: extract %q: %w", id, err)
	}
	cp.Status = StatusCompleted
	if err := dst.Save(ctx, cp); err != nil {
		return "", fmt.Errorf("checkpoint: extract: %w", err)
	}
	return id, nil
}

func randomHex() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
