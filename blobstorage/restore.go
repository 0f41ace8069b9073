package blobstorage

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/internal/localfs"
	"github.com/tidemark-io/tidemark/internal/simbug"
)

// Restore downloads the state directories of checkpoint id into
// StateDir(id), for a node that does not have them (an empty disk). Every
// file is downloaded in parallel into a temporary directory beside it,
// its size and SHA-256 checked in the same pass, and the whole directory
// renamed into place: StateDir(id) either appears complete and verified
// or not at all. The files are not fsynced one by one: a marker makes a
// machine crash detectable instead (see unsynced.go). If StateDir(id)
// exists already and its files have the recorded sizes, Restore downloads
// nothing — unless it was restored unsynced before the machine restarted,
// when its digests are checked first and it is restored afresh if one
// differs. A StateDir(id) whose files do not have the recorded sizes (the
// leftover of a checkpoint this node took under the same id and never
// persisted) is replaced by a fresh restore.
//
// While it runs, Restore keeps a pin (pins/<id>/<nonce>) that stops GC
// from deleting the checkpoint. A file deleted anyway (a GC older than
// the pin, or a pin older than PinTTL) fails the restore with an error
// that says so; content that does not match the record wraps
// ErrCorrupt and names the key. Restore needs no writer role.
//
// The immutable files restored are remembered, so that a Save of a later
// checkpoint that hard-links them references them instead of uploading.
//
// Of a checkpoint of state in remote mode only the files are downloaded
// (MANIFEST, OPTIONS, remote object catalog, WAL, local SSTs): the remote
// objects stay in the store, and the state is opened with
// state.Options.Remote{Store: the same Blobstore, Prefix: RemotePrefix,
// Generation: RemoteGeneration(epoch)} (then UseRemote).
func (s *Storage) Restore(ctx context.Context, id string) error {
	return s.restore(ctx, id, nil, true)
}

// restore is Restore of every owner (all) or only of owners (Worker.Restore).
func (s *Storage) restore(ctx context.Context, id string, owners []string, all bool) (err error) {
	st, start := RestoreStats{ID: id}, time.Now()
	defer func() {
		st.Duration, st.Err = time.Since(start), err
		s.opts.Observer.Restored(st)
	}()
	if err := checkpoint.ValidateID(id); err != nil {
		return fmt.Errorf("blobstorage: restore %q: %w", id, err)
	}
	unpin, err := s.pin(ctx, id)
	if err != nil {
		return fmt.Errorf("blobstorage: restore %q: %w", id, err)
	}
	defer unpin()
	rec, err := s.readRecord(ctx, id)
	if err != nil {
		return fmt.Errorf("blobstorage: restore: %w", err)
	}
	if !all {
		if rec, err = rec.only(owners); err != nil {
			return fmt.Errorf("blobstorage: restore %q: %w", id, err)
		}
	}
	// A store without the files' key is refused before the local state
	// directory is touched (the pin goes with the deferred unpin).
	if err := s.checkKey(ctx, rec); err != nil {
		return fmt.Errorf("blobstorage: restore %q: %w", id, err)
	}
	dst := s.StateDir(id)
	fsys := s.opts.FS
	if _, err := fsys.Lstat(dst); err == nil {
		switch serr := checkSizes(fsys, dst, rec); {
		case serr != nil:
			// Not this record's state: the leftover of a checkpoint this
			// node took under the same id but never persisted (a writer
			// fenced mid-checkpoint, whose id a newer writer's checkpoint
			// — a savepoint restored as a new lineage — then took). It is
			// worth nothing: restore afresh.
			s.opts.Logger.Info("blobstorage: restore: the local state directory does not match the record; restoring afresh",
				"id", id, "dir", dst, "why", serr.Error())
		case simbug.On(simbug.TrustUnmarked) && !hasBootMarker(fsys, dst),
			checkDigests(fsys, dst, rec) == nil:
			// Every digest holds: this record's state. Equal sizes are
			// not enough: a fenced writer's leftover of the same id can
			// match them byte count for byte count. Read back after a
			// reboot, the files are on disk: the marker can go.
			if unsyncedSinceReboot(fsys, dst) {
				if err := fsys.Remove(bootMarker(dst)); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return fmt.Errorf("blobstorage: restore %q: %w", id, err)
				}
			}
			s.seedCache(dst, rec)
			return nil
		default:
			s.opts.Logger.Info("blobstorage: restore: the local state directory does not match the record's digests; restoring afresh",
				"id", id, "dir", dst)
		}
		if err := fsys.RemoveAll(dst); err != nil {
			return fmt.Errorf("blobstorage: restore %q: %w", id, err)
		}
		if err := fsys.Remove(bootMarker(dst)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("blobstorage: restore %q: %w", id, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("blobstorage: restore %q: %w", id, err)
	}
	boot := fsys.BootID() // "" where there is none: then every file is fsynced
	if err := fsys.MkdirAll(s.localDir, 0o755); err != nil {
		return fmt.Errorf("blobstorage: restore %q: %w", id, err)
	}
	// The temporary name starts with '.' and contains ".tmp-", the
	// pattern checkpoint.FileStorage.SweepOrphans removes after a crash.
	tmp, err := fsys.MkdirTemp(s.localDir, checkpoint.TempPattern(checkpoint.StateDirName(id)))
	if err != nil {
		return fmt.Errorf("blobstorage: restore %q: %w", id, err)
	}
	defer func() {
		if err != nil {
			_ = fsys.RemoveAll(tmp)
		}
	}()
	if err := s.download(ctx, tmp, rec, boot == ""); err != nil {
		return fmt.Errorf("blobstorage: restore %q: %w", id, err)
	}
	for _, files := range rec.Files {
		for _, f := range files {
			st.Files++
			st.Bytes += f.Size
		}
	}
	// Directories are fsynced before the rename, so that the renamed
	// tree is durable; the parent after it, so that the rename is. The
	// files' data is not (see unsynced.go): the marker saying so is
	// durable before the rename.
	if err := fsys.SyncTree(tmp); err != nil {
		return fmt.Errorf("blobstorage: restore %q: %w", id, err)
	}
	if boot != "" {
		if err := writeBootMarker(fsys, dst, boot); err != nil {
			return fmt.Errorf("blobstorage: restore %q: %w", id, err)
		}
	} else if err := fsys.Remove(bootMarker(dst)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("blobstorage: restore %q: %w", id, err)
	}
	if err := fsys.Rename(tmp, dst); err != nil {
		return fmt.Errorf("blobstorage: restore %q: %w", id, err)
	}
	if err := fsys.SyncDir(s.localDir); err != nil {
		return fmt.Errorf("blobstorage: restore %q: %w", id, err)
	}
	s.seedCache(dst, rec)
	return nil
}

// pin writes pins/<id>/<random> and returns a function deleting it.
func (s *Storage) pin(ctx context.Context, id string) (func(), error) {
	if simbug.On(simbug.ForgetPin) {
		return func() {}, nil
	}
	var nonce [16]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return nil, err
	}
	key := pinKey(id, hex.EncodeToString(nonce[:]))
	if err := s.bs.Put(ctx, key, bytes.NewReader(nil)); err != nil {
		return nil, fmt.Errorf("pin: %w", err)
	}
	return func() {
		// Unpin even when ctx is cancelled: a leftover pin would hold
		// the checkpoint for PinTTL.
		_ = s.bs.Delete(context.WithoutCancel(ctx), key)
	}, nil
}

// localPath returns where file f of owner lives under root.
func localPath(root string, rec *Record, owner string, f FileRef) string {
	return filepath.Join(root, filepath.FromSlash(rec.StateDirs[owner]), filepath.FromSlash(f.Path))
}

// download fetches every file of rec under root, verifying each.
func (s *Storage) download(ctx context.Context, root string, rec *Record, syncFiles bool) error {
	for _, rel := range rec.StateDirs {
		if err := s.opts.FS.MkdirAll(filepath.Join(root, filepath.FromSlash(rel)), 0o755); err != nil {
			return err
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.opts.Concurrency)
	for _, owner := range sortedOwners(rec.Files) {
		for _, f := range rec.Files[owner] {
			dst := localPath(root, rec, owner, f)
			g.Go(func() error {
				if err := s.downloadFile(gctx, dst, f, syncFiles); err != nil {
					return fmt.Errorf("owner %q file %s (key %q): %w", owner, f.Path, f.Key, err)
				}
				return nil
			})
		}
	}
	return g.Wait()
}

// downloadFile writes the object f.Key to dst, checking size and digest
// as it streams, with direct I/O where it can (directwrite.go), and
// fsyncs it if syncFile (see unsynced.go).
func (s *Storage) downloadFile(ctx context.Context, dst string, f FileRef, syncFile bool) (err error) {
	if err := s.opts.FS.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	w, fh, err := createRestored(s.opts.FS, dst, !s.opts.BufferedRestore)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
	}()
	if err := s.readVerified(ctx, f, w); err != nil {
		return err
	}
	if syncFile {
		return fh.Sync()
	}
	return nil
}

// readVerified copies the object f.Key to w, checking its size and digest
// in the same pass: a mismatch wraps ErrCorrupt, a missing object
// says it was deleted.
func (s *Storage) readVerified(ctx context.Context, f FileRef, w io.Writer) error {
	rc, err := s.files.Get(blobstore.WithContentVerified(ctx), f.Key)
	if errors.Is(err, blobstore.ErrNotFound) {
		// A record names only objects that were durable before it was
		// written: a missing one is damage, as a corrupt one is.
		return fmt.Errorf("%w: deleted from the store (by GC, or never uploaded): %w", ErrCorrupt, err)
	}
	if err != nil {
		return err
	}
	defer rc.Close()
	h := sha256.New()
	// Read one byte past the size: a longer object is corrupt, and must
	// not fill the disk before we notice. Each chunk is hashed as it is
	// read, while it is in the CPU's cache.
	src := io.TeeReader(io.LimitReader(rc, f.Size+1), h)
	var n int64
	if d, ok := w.(*directFile); ok {
		n, err = d.ReadFrom(src)
	} else {
		n, err = io.Copy(writerOnly{w}, src) // through io.Copy's 32 KiB buffer
	}
	if err != nil {
		return err
	}
	if n != f.Size {
		return fmt.Errorf("%w: size %d, record says %d", ErrCorrupt, n, f.Size)
	}
	if sum := hex.EncodeToString(h.Sum(nil)); sum != f.SHA256 {
		return fmt.Errorf("%w: sha256 %s, record says %s", ErrCorrupt, sum, f.SHA256)
	}
	return nil
}

// Verify downloads every file of checkpoint id and checks its size and
// digest against the record, writing nothing. The first mismatch is an
// error wrapping ErrCorrupt that names the key; a missing object
// wraps blobstore.ErrNotFound. The remote objects of state in remote mode
// (Record.Remote) are checked by a Stat each: present, with the recorded
// size (their content is checked by Pebble's block checksums when read).
func (s *Storage) Verify(ctx context.Context, id string) error {
	rec, err := s.LoadRecord(ctx, id)
	if err != nil {
		return err
	}
	if err := s.verifyRemote(ctx, rec); err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.opts.Concurrency)
	for _, owner := range sortedOwners(rec.Files) {
		for _, f := range rec.Files[owner] {
			g.Go(func() error {
				if err := s.verifyObject(gctx, f); err != nil {
					return fmt.Errorf("blobstorage: verify %q: owner %q file %s (key %q): %w", id, owner, f.Path, f.Key, err)
				}
				return nil
			})
		}
	}
	return g.Wait()
}

// writerOnly hides the ReadFrom of a writer, such as io.Discard's, which
// reads in smaller chunks than io.Copy's buffer.
type writerOnly struct{ io.Writer }

func (s *Storage) verifyObject(ctx context.Context, f FileRef) error {
	return s.readVerified(ctx, f, io.Discard)
}

// checkSizes reports whether every file of rec exists under root with the
// recorded size (a cheap check of a state directory already present).
func checkSizes(fsys localfs.FS, root string, rec *Record) error {
	for owner, files := range rec.Files {
		for _, f := range files {
			fi, err := fsys.Lstat(localPath(root, rec, owner, f))
			if err != nil {
				return err
			}
			if !fi.Mode().IsRegular() || fi.Size() != f.Size {
				return fmt.Errorf("owner %q file %s: size %d, record says %d", owner, f.Path, fi.Size(), f.Size)
			}
		}
	}
	return nil
}

// seedCache remembers the identities of the restored immutable files, so
// that a later Save finds the hard links Pebble makes to them.
func (s *Storage) seedCache(root string, rec *Record) {
	for owner, files := range rec.Files {
		for _, f := range files {
			if !isSharedKey(f.Key) {
				continue
			}
			fi, err := os.Lstat(localPath(root, rec, owner, f))
			if err != nil {
				continue
			}
			if fid, ok := fileIdentOf(fi); ok && fi.Size() == f.Size {
				s.cache.put(fid, cachedFile{key: f.Key, size: f.Size, sha256: f.SHA256})
			}
		}
	}
}
