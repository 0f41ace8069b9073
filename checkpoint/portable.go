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
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tidemark-io/tidemark/archive"
	"github.com/tidemark-io/tidemark/internal/fsync"
)

// ArchiveCheckpoint writes a self-contained archive (package archive) of
// checkpoint id — its JSON record plus a real copy of every per-owner
// state directory, as state/<owner>/… — to w. A blobstorage.Storage adds the
// remote objects of state in remote mode, as remote/<owner>/…. Unlike the live checkpoint
// (Pebble hard-links on one filesystem), the archive is portable: it can be
// moved to another volume, host, or object store and extracted anywhere.
//
// Only completed checkpoints are archived: extraction makes the archive a
// completed checkpoint, so archiving a prepared one would claim a commit
// nobody proved. Owner ids must be single key segments and state paths
// must stay inside src.StateDir(id).
func ArchiveCheckpoint(ctx context.Context, src Storage, id string, w io.Writer) error {
	m, open, err := archiveFiles(ctx, src, id, nil)
	if err != nil {
		return err
	}
	if err := archive.Write(ctx, w, m, open, archive.WriteOptions{}); err != nil {
		return fmt.Errorf("checkpoint: archive %q: %w", id, err)
	}
	return nil
}

// archiveFiles returns the manifest of checkpoint id's archive (see
// ArchiveCheckpoint) and an OpenFunc serving its files, unchecked (the
// archive writer or the savepoint area checks them as they stream).
// known, if not nil, gives remote objects' digests already known.
func archiveFiles(ctx context.Context, src Storage, id string, known func(key string, size int64) (string, bool)) (*archive.Manifest, archive.OpenFunc, error) {
	cp, err := src.LoadSpecific(ctx, id)
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint: archive: %w", err)
	}
	if !cp.Completed() {
		return nil, nil, fmt.Errorf("checkpoint: archive %q: status %q is not completed", id, cp.Status)
	}
	if err := ValidateStateDirs(cp.StateDirs); err != nil {
		return nil, nil, fmt.Errorf("checkpoint: archive %q: %w", id, err)
	}
	rec, err := json.Marshal(cp)
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint: archive %q: %w", id, err)
	}
	m := &archive.Manifest{Version: archive.FormatVersion, Record: rec}
	if as, ok := src.(ArchiveSource); ok { // stream from the store, no local copy needed
		var files []archive.File
		var open archive.OpenFunc
		var err error
		if known != nil {
			files, open, err = as.ArchiveFilesKnowing(ctx, id, known)
		} else {
			files, open, err = as.ArchiveFiles(ctx, id)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("checkpoint: archive %q: %w", id, err)
		}
		m.Files = files
		return m, open, nil
	}
	openers := map[string]archive.OpenFunc{}
	owners := slices.Sorted(maps.Keys(cp.StateDirs))
	for _, owner := range owners {
		dir := filepath.Join(src.StateDir(id), filepath.FromSlash(cp.StateDirs[owner]))
		prefix := archive.StatePrefix + owner
		files, err := archive.DirFiles(ctx, dir, prefix)
		if err != nil {
			return nil, nil, fmt.Errorf("checkpoint: archive %q: owner %q: %w", id, owner, err)
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
	return m, open, nil
}

// ExtractCheckpoint reads an archive produced by ArchiveCheckpoint and
// materializes it into dst as a completed checkpoint: state files are
// written under dst.StateDir(id) and the record is saved (status
// completed) so that dst.LoadLatestCompleted returns it. Returns the
// checkpoint ID. Onto a blobstorage.Storage, call its Acquire first:
// saving the record needs the writer role (it fences the current writer).
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
// The job then reads again from the restored offsets: the sink output
// committed after them is emitted a second time, by design.
//
// An archive of state in remote mode carries the remote objects too
// (archive.RemotePrefix): dst must be able to hold them (a
// blobstorage.Storage, which uploads them under the same keys and records
// them, so that the state opens in remote mode on dst's store); any other
// Storage is refused with ErrRemoteState before anything is written.
//
// A staging directory left by a crash is named like an orphan state
// directory, so FileStorage.SweepOrphans removes it.
func ExtractCheckpoint(ctx context.Context, dst Storage, r io.Reader) (string, error) {
	return ExtractCheckpointWith(ctx, dst, r, RestoreOptions{})
}

// ExtractCheckpointWith is ExtractCheckpoint with options. Before
// anything is written it refuses, with a *JobMismatch wrapping
// ErrOtherJob, an archive of another job than the checkpoints dst holds
// (see CheckJob), unless opts.NewJob: then the checkpoint gets a new job
// id (NewJobID) and, onto a dst holding checkpoints, a new lineage after
// them even when its id is newer, its record marked as the start of the
// job (JobStartKey). Without NewJob the checkpoint keeps its job id; one
// without (an archive from before ids) takes dst's.
func ExtractCheckpointWith(ctx context.Context, dst Storage, r io.Reader, opts RestoreOptions) (string, error) {
	ar, err := archive.NewReader(ctx, r, archive.Limits{})
	if err != nil {
		return "", fmt.Errorf("checkpoint: extract: %w", err)
	}
	defer ar.Close()
	m := ar.Manifest()
	cp, err := DecodeRecord(m.Record)
	if err != nil {
		return "", fmt.Errorf("checkpoint: extract: %w: %w", archive.ErrCorrupt, err)
	}
	id := cp.ID
	if !cp.Completed() {
		return "", fmt.Errorf("checkpoint: extract %q: %w: status %q is not completed", id, archive.ErrCorrupt, cp.Status)
	}
	var remote []archive.File
	for _, f := range m.Files {
		rest, isRemote := strings.CutPrefix(f.Path, archive.RemotePrefix)
		if isRemote {
			remote = append(remote, f)
		} else {
			rest = strings.TrimPrefix(f.Path, archive.StatePrefix)
		}
		owner, _, _ := strings.Cut(rest, "/")
		if _, ok := cp.StateDirs[owner]; !ok {
			return "", fmt.Errorf("checkpoint: extract %q: %w: file %q belongs to no owner of the record", id, archive.ErrCorrupt, f.Path)
		}
	}
	// Every check that can refuse comes before anything is written: the
	// target must be able to hold the remote objects and take the record.
	importer, canImport := dst.(RemoteImporter)
	if len(remote) > 0 && !canImport {
		return "", fmt.Errorf("checkpoint: extract %q: %w: the archive holds %d remote objects of state in remote mode, which a %T cannot hold; restore it into an object-store Storage (blobstorage)", id, ErrRemoteState, len(remote), dst)
	}
	if w, ok := dst.(WriterRole); ok {
		if err := w.CheckWriter(ctx); err != nil {
			return "", fmt.Errorf("checkpoint: extract %q: %w", id, err)
		}
	}
	latest, err := dst.Load(ctx)
	if err != nil {
		return "", fmt.Errorf("checkpoint: extract %q: %w", id, err)
	}
	if err := checkJob(cp, latest, opts); err != nil {
		return "", fmt.Errorf("checkpoint: extract: %w", err)
	}
	if opts.NewJob {
		startJob(cp)
	}
	if latest != nil && (latest.ID >= id || opts.NewJob) {
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
	remoteDir, err := extractState(ctx, ar, dst.StateDir(id), cp, len(remote) > 0)
	if err != nil {
		return "", fmt.Errorf("checkpoint: extract %q: %w", id, err)
	}
	if remoteDir != "" {
		defer os.RemoveAll(remoteDir)
	}
	cp.Status = StatusCompleted
	if len(remote) > 0 {
		err = importer.SaveImported(ctx, cp, remote, archive.DirOpener(remoteDir, archive.RemotePrefix))
	} else {
		err = dst.Save(ctx, cp)
	}
	if err != nil {
		// Leave nothing: the state directory belongs to no record.
		_ = os.RemoveAll(dst.StateDir(id))
		return "", fmt.Errorf("checkpoint: extract: %w", err)
	}
	return id, nil
}

// ErrRemoteState is returned (wrapped) by ExtractCheckpoint, before
// anything is written, for an archive of state in remote mode (one that
// carries remote objects, archive.RemotePrefix) and a target Storage that
// cannot hold them (a FileStorage): restore it into a blobstorage.Storage.
var ErrRemoteState = errors.New("checkpoint: state in remote mode needs an object-store Storage")

// extractState extracts the files of ar into stateDir laid out as cp's
// state directories, all or nothing: the archive is verified into a
// staging directory beside stateDir (archive.Reader.Extract, relative to
// a handle on the parent, so no symlink swapped in can redirect a byte),
// the owners' directories are arranged inside a second staging directory
// through the same handle, and only that is renamed into place, replacing
// any orphan left at stateDir (no record names it: dst holds nothing this
// new). Both staging names start with '.' and contain ".tmp-", so
// SweepOrphans removes what a crash leaves. A refusal leaves the parent
// as it was, except for creating it when it did not exist.
//
// With withRemote, the archive's remote objects (archive.RemotePrefix)
// are moved into a third staging directory beside stateDir, whose path
// is returned for the caller to upload from and remove.
func extractState(ctx context.Context, ar *archive.Reader, stateDir string, cp *CheckpointData, withRemote bool) (remoteDir string, err error) {
	parent, name := filepath.Split(stateDir)
	created := false
	if _, err := os.Lstat(parent); errors.Is(err, fs.ErrNotExist) {
		created = true
	}
	if err := fsync.MkdirAll(parent, 0o755); err != nil {
		return "", err
	}
	defer func() {
		if err != nil && created {
			_ = os.Remove(parent)
		}
	}()
	root, err := os.OpenRoot(parent)
	if err != nil {
		return "", err
	}
	defer root.Close()
	verified := "." + name + tempMarker + "verified-" + randomHex()
	if err := ar.Extract(ctx, root, verified); err != nil {
		return "", err
	}
	defer root.RemoveAll(verified)
	laid := "." + name + tempMarker + "laid-" + randomHex()
	if err := root.Mkdir(laid, 0o755); err != nil {
		return "", err
	}
	defer func() {
		if err != nil {
			_ = root.RemoveAll(laid)
		}
	}()
	for _, owner := range slices.Sorted(maps.Keys(cp.StateDirs)) {
		to := path.Join(laid, cp.StateDirs[owner])
		if err := root.MkdirAll(path.Dir(to), 0o755); err != nil {
			return "", err
		}
		err := root.Rename(path.Join(verified, archive.StatePrefix+owner), to)
		if errors.Is(err, fs.ErrNotExist) {
			err = root.Mkdir(to, 0o755) // an owner whose state dir was empty
		}
		if err != nil {
			return "", err
		}
	}
	if withRemote {
		// Read back (uploaded) before the record is saved, then removed
		// by the caller; not part of the state directory.
		staged := "." + name + tempMarker + "remote-" + randomHex()
		if err := root.Rename(path.Join(verified, strings.TrimSuffix(archive.RemotePrefix, "/")), staged); err != nil {
			return "", err
		}
		defer func() {
			if err != nil {
				_ = root.RemoveAll(staged)
			}
		}()
		remoteDir = filepath.Join(parent, staged)
	}
	// The renames and new directories must be durable before the rename
	// that publishes them, and that before the record that names them.
	if err := fsync.Tree(filepath.Join(parent, laid)); err != nil {
		return "", err
	}
	if err := root.RemoveAll(name); err != nil {
		return "", err
	}
	if err := root.Rename(laid, name); err != nil {
		return "", err
	}
	return remoteDir, fsync.Dir(parent)
}

func randomHex() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
