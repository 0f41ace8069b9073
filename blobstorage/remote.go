package blobstorage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"path"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/tidemark-io/tidemark/archive"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
)

// RemotePrefix is the key prefix, relative to the Storage's Blobstore,
// under which state in remote mode keeps its objects: pass it as
// state.RemoteOptions.Prefix, with RemoteOptions.Store the same Blobstore
// the Storage was given. Objects are then at
// remote/<owner>/<locator>/<name>, where the locator starts with
// RemoteGeneration(epoch) of the writer that created them.
const RemotePrefix = "remote"

// RemoteGeneration returns "e<epoch>", the generation a writer of the
// given epoch passes as state.RemoteOptions.Generation, so that GC can
// tell which writer created an object and leave a live writer's objects
// alone.
func RemoteGeneration(epoch uint64) string { return epochSegment(epoch) }

// RemoteRef is one object of remote-mode state that a checkpoint
// references without uploading it (an ownership hand-off).
type RemoteRef = blobstore.Ref

// RemoteState is the view of remote-mode state a Storage needs
// ((*state.Store).CheckpointRemote returns one).
type RemoteState interface {
	// CheckpointObjects returns, per owner, the objects the checkpoint
	// in dir (a StateDir) references.
	CheckpointObjects(ctx context.Context, dir string) (map[string][]RemoteRef, error)
	// LiveObjects returns, per owner, the objects the open databases
	// reference now.
	LiveObjects() (map[string][]RemoteRef, error)
	// Prefixes returns, per owner, the key prefix (ending in '/') under
	// which the open databases create new objects.
	Prefixes() map[string]string
}

// UseRemote puts the Storage in remote mode: from now on Save records
// r.CheckpointObjects(StateDir(id)) in the record (Record.Remote) instead
// of uploading those objects, and GC protects r's live objects and
// prefixes. Call it after opening the state (after Acquire or Restore),
// with the state opened with state.RemoteOptions{Store: the Storage's
// Blobstore, Prefix: RemotePrefix, Generation: RemoteGeneration(epoch)}.
//
// A Save of a state directory holding a remote object catalog (Pebble's
// REMOTE-OBJ-CATALOG-*) without UseRemote fails: the objects would be
// owned by no checkpoint, and GC would delete them.
//
// The writer's own GC deletes objects its open databases created, no
// longer use and no retained checkpoint references, once older than
// Grace; an object in a state checkpoint taken but not yet saved is
// protected by Grace only, so Grace must also exceed the time between a
// state checkpoint and its Save and the interval between checkpoints.
func (s *Storage) UseRemote(r RemoteState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.remote = r
}

// remoteCatalogPrefix starts the name of Pebble's remote object catalog,
// present in a state directory only in remote mode.
const remoteCatalogPrefix = "REMOTE-OBJ-CATALOG-"

// remoteRefsLocked returns the remote objects checkpoint data references
// (nil in local mode) for the owners data saves from the local disk,
// checked: each key
// valid and under RemotePrefix, and each object not created by this
// Storage's open databases exists with its size (a Stat, once per
// epoch). Objects under the state's own prefixes were durable before
// Pebble recorded them, and only that database or this writer's GC
// deletes them.
func (s *Storage) remoteRefsLocked(ctx context.Context, data *checkpoint.CheckpointData, files []*localFile) (map[string][]RemoteRef, error) {
	if s.imported != nil && s.imported.id == data.ID {
		return s.imported.refs, nil // uploaded and checked by SaveImported
	}
	return s.checkedRemoteRefs(ctx, data, files, s.epoch, "call UseRemote before Save")
}

// checkedRemoteRefs is remoteRefsLocked for a Save or a worker's SavePart
// under epoch; what says what to do when the state is remote but
// UseRemote was not called.
func (s *Storage) checkedRemoteRefs(ctx context.Context, data *checkpoint.CheckpointData, files []*localFile, epoch uint64, what string) (map[string][]RemoteRef, error) {
	if s.remote == nil {
		return nil, refuseRemoteCatalog(files, what)
	}
	if len(data.StateDirs) == 0 {
		return nil, nil // no state (and maybe no StateDir) in this checkpoint
	}
	refs, err := s.remote.CheckpointObjects(ctx, s.StateDir(data.ID))
	if err != nil {
		return nil, fmt.Errorf("remote objects: %w", err)
	}
	out := map[string][]RemoteRef{}
	for owner, list := range refs {
		if _, ok := data.StateDirs[owner]; !ok || len(list) == 0 {
			continue // not saved from here (a worker's owner, see Assign)
		}
		list = slices.Clone(list)
		slices.SortFunc(list, func(a, b RemoteRef) int { return strings.Compare(a.Key, b.Key) })
		out[owner] = slices.CompactFunc(list, func(a, b RemoteRef) bool { return a.Key == b.Key })
	}
	if err := validateRemote(data, out); err != nil {
		return nil, err
	}
	var own []string
	for _, p := range s.remote.Prefixes() {
		own = append(own, p)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.opts.Concurrency)
	var mu sync.Mutex
	var verified []string
	for owner, list := range out {
		for _, r := range list {
			if s.remoteKnown[r.Key] == epoch || hasAnyPrefix(r.Key, own) {
				continue
			}
			g.Go(func() error {
				info, err := s.bs.Stat(gctx, r.Key)
				if err != nil {
					return fmt.Errorf("owner %q: remote object %q: %w", owner, r.Key, err)
				}
				if info.Size != r.Size {
					return fmt.Errorf("owner %q: remote object %q: %w: size %d in the store, %d in the state", owner, r.Key, ErrCorrupt, info.Size, r.Size)
				}
				mu.Lock()
				verified = append(verified, r.Key)
				mu.Unlock()
				return nil
			})
		}
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if s.remoteKnown == nil && len(verified) > 0 {
		s.remoteKnown = map[string]uint64{}
	}
	for _, k := range verified {
		s.remoteKnown[k] = epoch
	}
	return out, nil
}

// ErrRemoteNotOwned is wrapped by the refusal of a Save or SavePart of
// state in remote mode by a Storage or Worker not told of it (UseRemote).
// No checkpoint would own the state's objects, and GC would delete them.
var ErrRemoteNotOwned = errors.New("state in remote mode, and no checkpoint would own its objects")

// refuseRemoteCatalog fails if a file is a remote object catalog: state
// in remote mode whose objects this save would not hand over to the
// checkpoint (nothing would own them, and GC would delete them). what
// says what to do instead.
func refuseRemoteCatalog(files []*localFile, what string) error {
	for _, f := range files {
		if strings.HasPrefix(path.Base(f.rel), remoteCatalogPrefix) {
			return fmt.Errorf("%w: owner %q (%s): %s", ErrRemoteNotOwned, f.owner, f.rel, what)
		}
	}
	return nil
}

func hasAnyPrefix(key string, prefixes []string) bool {
	for _, p := range prefixes {
		if p != "" && strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// validateRemote checks the remote references of a record: each owner has
// a state dir, each key is a valid key under RemotePrefix and appears
// once, and no size is negative.
func validateRemote(d *checkpoint.CheckpointData, remote map[string][]RemoteRef) error {
	seen := map[string]bool{}
	for owner, refs := range remote {
		if _, ok := d.StateDirs[owner]; !ok {
			return fmt.Errorf("remote objects of owner %q, which has no state dir", owner)
		}
		for _, r := range refs {
			if err := blobstore.ValidateKey(r.Key); err != nil {
				return fmt.Errorf("remote object of owner %q: %w", owner, err)
			}
			if !strings.HasPrefix(r.Key, dirRemote) {
				return fmt.Errorf("remote object %q of owner %q is not under %s", r.Key, owner, dirRemote)
			}
			if r.Size < 0 {
				return fmt.Errorf("remote object %q of owner %q: bad size %d", r.Key, owner, r.Size)
			}
			if seen[r.Key] {
				return fmt.Errorf("remote object %q is listed twice", r.Key)
			}
			seen[r.Key] = true
		}
	}
	return nil
}

// liveRemote is what the writer's own state says it uses, for GC.
type liveRemote struct {
	keys     map[string]bool
	prefixes []string
}

// liveRemoteLocked returns the live objects and prefixes of the state
// UseRemote gave, or nil when this GC is not that writer's: without
// UseRemote, or when another writer holds the role (epoch differs).
func (s *Storage) liveRemoteLocked(writerEpoch uint64) (*liveRemote, error) {
	if s.remote == nil || s.epoch == 0 || s.epoch != writerEpoch {
		return nil, nil
	}
	live, err := s.remote.LiveObjects()
	if err != nil {
		return nil, fmt.Errorf("live remote objects: %w", err)
	}
	l := &liveRemote{keys: map[string]bool{}}
	for _, refs := range live {
		for _, r := range refs {
			l.keys[r.Key] = true
		}
	}
	for _, p := range s.remote.Prefixes() {
		if p != "" {
			l.prefixes = append(l.prefixes, p)
		}
	}
	return l, nil
}

// readWriterEpoch returns the epoch _writer holds (0 when absent).
func (s *Storage) readWriterEpoch(ctx context.Context) (uint64, error) {
	var w writerRecord
	_, err := s.getJSON(ctx, keyWriter, &w, false)
	if errors.Is(err, blobstore.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", keyWriter, err)
	}
	return w.Epoch, nil
}

// verifyRemote checks that every remote object of rec exists with its
// recorded size (a Stat each: the content is checked by Pebble's block
// checksums when it is read, not here).
func (s *Storage) verifyRemote(ctx context.Context, rec *Record) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.opts.Concurrency)
	for _, owner := range sortedOwners(rec.Remote) {
		for _, r := range rec.Remote[owner] {
			g.Go(func() error {
				info, err := s.bs.Stat(gctx, r.Key)
				if errors.Is(err, blobstore.ErrNotFound) {
					return fmt.Errorf("blobstorage: verify %q: owner %q remote object %q: %w: deleted from the store: %w", rec.ID, owner, r.Key, ErrCorrupt, err)
				}
				if err != nil {
					return fmt.Errorf("blobstorage: verify %q: owner %q remote object %q: %w", rec.ID, owner, r.Key, err)
				}
				if info.Size != r.Size {
					return fmt.Errorf("blobstorage: verify %q: owner %q remote object %q: %w: size %d, record says %d", rec.ID, owner, r.Key, ErrCorrupt, info.Size, r.Size)
				}
				return nil
			})
		}
	}
	return g.Wait()
}

// countRemote returns the number and total size of the objects in refs.
func countRemote(refs map[string][]RemoteRef) (n int, bytes int64) {
	for _, list := range refs {
		for _, r := range list {
			n++
			bytes += r.Size
		}
	}
	return n, bytes
}

// remoteArchiveFiles returns the archive entries of rec's remote objects,
// each path being the object's key, hashed by reading each object once
// (in parallel) unless known (if not nil) has its digest. The size read
// must be the recorded one.
func (s *Storage) remoteArchiveFiles(ctx context.Context, rec *Record, known func(string, int64) (string, bool)) ([]archive.File, error) {
	var files []archive.File
	for _, owner := range sortedOwners(rec.Remote) {
		for _, r := range rec.Remote[owner] {
			if !strings.HasPrefix(r.Key, dirRemote+owner+"/") {
				return nil, fmt.Errorf("blobstorage: archive %q: remote object %q of owner %q is not under %s%s/", rec.ID, r.Key, owner, dirRemote, owner)
			}
			if err := archive.ValidatePath(r.Key); err != nil {
				return nil, fmt.Errorf("blobstorage: archive %q: %w", rec.ID, err)
			}
			files = append(files, archive.File{Path: r.Key, Size: r.Size})
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.opts.Concurrency)
	for i := range files {
		f := &files[i]
		if known != nil {
			if d, ok := known(f.Path, f.Size); ok {
				f.SHA256 = d
				continue
			}
		}
		g.Go(func() error {
			rc, err := s.files.Get(gctx, f.Path)
			if err != nil {
				return fmt.Errorf("blobstorage: archive %q: remote object %q: %w", rec.ID, f.Path, err)
			}
			defer rc.Close()
			h := sha256.New()
			n, err := io.Copy(h, io.LimitReader(rc, f.Size+1))
			if err != nil {
				return fmt.Errorf("blobstorage: archive %q: remote object %q: %w", rec.ID, f.Path, err)
			}
			if n != f.Size {
				return fmt.Errorf("blobstorage: archive %q: remote object %q: %w: size %d, record says %d", rec.ID, f.Path, ErrCorrupt, n, f.Size)
			}
			f.SHA256 = hex.EncodeToString(h.Sum(nil))
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return files, nil
}

// SaveImported saves data as Save does, for a checkpoint extracted from
// an archive (checkpoint.ExtractCheckpoint calls it when the archive
// carries remote objects): it first uploads every object in objects to
// the key its archive path names (under RemotePrefix), reading it with
// open and checking its size and SHA-256, then saves data recording those
// objects as the checkpoint's remote objects (Record.Remote, by the owner
// segment of each key). State restored from it then opens in remote mode
// on this Storage's Blobstore. Objects are immutable, so an object
// already in the store under its key is the same one and is uploaded
// again harmlessly. A failure leaves no record; objects already uploaded
// are unreferenced and GC deletes them after the grace period.
func (s *Storage) SaveImported(ctx context.Context, data *checkpoint.CheckpointData, objects []archive.File, open archive.OpenFunc) error {
	refs := map[string][]RemoteRef{}
	for _, f := range objects {
		rest, ok := strings.CutPrefix(f.Path, dirRemote)
		owner, _, found := strings.Cut(rest, "/")
		if !ok || !found {
			return fmt.Errorf("blobstorage: save %q: archived object %q is not under %s<owner>/", data.ID, f.Path, dirRemote)
		}
		refs[owner] = append(refs[owner], RemoteRef{Key: f.Path, Size: f.Size})
	}
	if err := checkpoint.ValidateRecord(data); err != nil {
		return fmt.Errorf("blobstorage: save: %w", err)
	}
	if err := validateRemote(data, refs); err != nil {
		return fmt.Errorf("blobstorage: save %q: %w", data.ID, err)
	}
	if err := s.CheckWriter(ctx); err != nil {
		return fmt.Errorf("blobstorage: save %q: %w", data.ID, err)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.opts.Concurrency)
	for _, f := range objects {
		g.Go(func() error {
			if err := s.putVerified(gctx, f, open); err != nil {
				return fmt.Errorf("blobstorage: save %q: remote object %q: %w", data.ID, f.Path, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	s.mu.Lock()
	s.imported = &importedRemote{id: data.ID, refs: refs}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.imported = nil
		s.mu.Unlock()
	}()
	return s.Save(ctx, data)
}

// importedRemote holds the remote objects SaveImported uploaded, for the
// Save of that id it makes.
type importedRemote struct {
	id   string
	refs map[string][]RemoteRef
}

// putVerified uploads the content open returns for f to key f.Path,
// failing (before the upload completes) if it does not match f's size
// and digest.
func (s *Storage) putVerified(ctx context.Context, f archive.File, open archive.OpenFunc) error {
	rc, err := open(ctx, f.Path)
	if err != nil {
		return err
	}
	defer rc.Close()
	return s.bs.Put(ctx, f.Path, &verifyingReader{r: io.LimitReader(rc, f.Size+1), h: sha256.New(), f: f})
}

// verifyingReader returns its content and, instead of io.EOF, an error
// wrapping archive.ErrCorrupt if the content did not match f: a store's
// Put fails on a reader error, so nothing wrong becomes visible.
type verifyingReader struct {
	r io.Reader
	h hash.Hash
	n int64
	f archive.File
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	n, err := v.r.Read(p)
	v.h.Write(p[:n])
	v.n += int64(n)
	if err == io.EOF {
		if v.n != v.f.Size {
			return n, fmt.Errorf("%w: size %d, archive says %d", archive.ErrCorrupt, v.n, v.f.Size)
		}
		if sum := hex.EncodeToString(v.h.Sum(nil)); sum != v.f.SHA256 {
			return n, fmt.Errorf("%w: sha256 %s, archive says %s", archive.ErrCorrupt, sum, v.f.SHA256)
		}
	}
	return n, err
}
