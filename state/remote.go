package state

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider/remoteobjcat"
	"github.com/cockroachdb/pebble/v2/objstorage/remote"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/state/remotestore"
)

// RemoteLevels says which SSTs a Store in remote mode creates in the
// object store.
type RemoteLevels int

const (
	// RemoteAllLevels creates every SST (flushes included) in the object
	// store: a checkpoint uploads no table at all, and a restore
	// downloads none.
	RemoteAllLevels RemoteLevels = iota
	// RemoteLowerLevels creates the SSTs of Pebble's two lowest levels
	// (L5 and L6, where nearly all the data of a large database sits) in
	// the object store and keeps L0–L4 on local disk: flushes and the
	// frequent small compactions stay local, and a checkpoint uploads the
	// local tables as it does without remote mode.
	RemoteLowerLevels
)

// String returns "all" or "lower".
func (l RemoteLevels) String() string {
	switch l {
	case RemoteAllLevels:
		return "all"
	case RemoteLowerLevels:
		return "lower"
	default:
		return fmt.Sprintf("RemoteLevels(%d)", int(l))
	}
}

// RemoteOptions put a Store in remote mode (instant restore): Pebble
// creates SSTs directly in an object store and reads them back block by
// block, through a cache on local disk. The zero value (Store nil) is
// local mode. See "Remote mode" in docs/state.md.
type RemoteOptions struct {
	// Store holds the objects. Nil means local mode.
	Store blobstore.Blobstore
	// Prefix is the key prefix of every object in Store:
	// <Prefix>/<owner>/<locator>/<Pebble object name>. It must be the same
	// for every writer of the state, because a restored database finds
	// the objects earlier writers created under it. Empty means no prefix.
	Prefix string
	// Generation labels the objects this Store creates, typically the
	// writer epoch ("e7"). It is 1–64 bytes of [A-Za-z0-9._-]. Uniqueness
	// does not depend on it: every open adds a random suffix (see
	// RemoteLocators). Empty means "g".
	Generation string
	// Levels chooses which SSTs are created in the store. The zero value
	// is RemoteAllLevels.
	Levels RemoteLevels
	// CacheSize is the size, in bytes, of each owner's secondary cache on
	// local disk: blocks read from the store are kept there (the block
	// cache in memory sits above it). Zero means 64 MiB; negative means
	// no secondary cache.
	CacheSize int64
}

func (o RemoteOptions) enabled() bool { return o.Store != nil }

func (o RemoteOptions) validate() error {
	if !o.enabled() {
		return nil
	}
	if o.Prefix != "" {
		if err := blobstore.ValidateKey(strings.TrimSuffix(o.Prefix, "/")); err != nil {
			return fmt.Errorf("state: remote prefix: %w", err)
		}
	}
	if o.Generation != "" && (len(o.Generation) > 64 || ValidateOwnerID(o.Generation) != nil) {
		return fmt.Errorf("state: remote generation %q: must be 1-64 bytes of [A-Za-z0-9._-]: %w", o.Generation, fs.ErrInvalid)
	}
	if o.Levels != RemoteAllLevels && o.Levels != RemoteLowerLevels {
		return fmt.Errorf("state: remote levels %v: %w", o.Levels, fs.ErrInvalid)
	}
	return nil
}

// RemoteObject is an object in the object store that state refers to.
type RemoteObject struct {
	// Owner is the owner whose database refers to the object.
	Owner string
	// Key is the object's key in RemoteOptions.Store.
	Key string
	// Size is the object's length in bytes.
	Size int64
}

// ownerRemote is one owner's view of the object store: the
// remote.StorageFactory of its database. Each locator in the database's
// catalog maps to the key prefix <base>/<locator>/; locator is the one
// this open writes under, fresh for every open, so no two databases (a
// fenced writer and its successor, two restores of one checkpoint) ever
// create objects under the same key.
//
// Objects are owned by the checkpoint layer, not by Pebble (see
// docs/state.md), so this view changes two of Pebble's habits:
//
//   - Pebble's reference markers (an empty "<object>.ref.<creator>.<n>"
//     object per SST, so that databases sharing an SST know when the last
//     one lets go) are virtual: creating one writes nothing, listing them
//     finds none, deleting one does nothing. No two databases share an
//     object here, and the markers would cost a PUT per new SST and a
//     LIST and DELETE per obsolete one.
//   - Pebble's deletion of an obsolete object goes through only for an
//     object this open created. Pebble never deletes an object that is in
//     a checkpoint taken by the same open (it protects checkpointed
//     objects for the life of the database), so such an object is in no
//     checkpoint at all. An object of another locator may be in a
//     retained checkpoint: it is left for the checkpoint layer's GC.
type ownerRemote struct {
	bs      blobstore.Blobstore
	base    string // "<Prefix>/<owner>" (or "<owner>")
	locator remote.Locator

	mu       sync.Mutex
	storages map[remote.Locator]*lineageStorage
	sizes    map[string]int64 // store key → size, from the MANIFEST (remote_sizes.go)
	closed   bool
}

var _ remote.StorageFactory = (*ownerRemote)(nil)

func newOwnerRemote(o RemoteOptions, owner string) (*ownerRemote, error) {
	base := owner
	if p := strings.TrimSuffix(o.Prefix, "/"); p != "" {
		base = p + "/" + owner
	}
	gen := o.Generation
	if gen == "" {
		gen = "g"
	}
	var nonce [8]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return nil, err
	}
	return &ownerRemote{
		bs:       o.Store,
		base:     base,
		locator:  remote.Locator(gen + "-" + hex.EncodeToString(nonce[:])),
		storages: make(map[remote.Locator]*lineageStorage),
	}, nil
}

// prefix returns the key prefix of the objects of locator loc.
func (r *ownerRemote) prefix(loc remote.Locator) string { return r.base + "/" + string(loc) }

// CreateStorage returns the storage of locator loc, which Pebble reads
// from the database's catalog (or CreateOnSharedLocator for new objects).
func (r *ownerRemote) CreateStorage(loc remote.Locator) (remote.Storage, error) {
	if loc == "" || ValidateOwnerID(string(loc)) != nil {
		return nil, fmt.Errorf("state: remote locator %q is not one this package creates", loc)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, ErrClosed
	}
	if s, ok := r.storages[loc]; ok {
		return s, nil
	}
	inner, err := remotestore.New(r.bs, r.prefix(loc), remotestore.Options{})
	if err != nil {
		return nil, err
	}
	s := &lineageStorage{Storage: inner, own: loc == r.locator, owner: r, loc: loc}
	r.storages[loc] = s
	return s, nil
}

func (r *ownerRemote) close() error {
	r.mu.Lock()
	r.closed = true
	storages := r.storages
	r.storages = nil
	r.mu.Unlock()
	var errs []error
	for _, s := range storages {
		errs = append(errs, s.Storage.Close())
	}
	return errors.Join(errs...)
}

// configure sets o up for remote mode with this owner's storage.
func (r *ownerRemote) configure(o *pebble.Options, ro RemoteOptions) {
	o.Experimental.RemoteStorage = r
	o.Experimental.CreateOnSharedLocator = r.locator
	o.Experimental.CreateOnShared = remote.CreateOnSharedAll
	if ro.Levels == RemoteLowerLevels {
		o.Experimental.CreateOnShared = remote.CreateOnSharedLower
	}
	// Collecting table statistics reads every table (a HEAD and its
	// properties) soon after open, which is exactly the work an instant
	// restore avoids, and its size check ends the process (Logger.Fatalf)
	// on a truncated object where a read fails cleanly. Without them
	// Pebble schedules tombstone-driven compactions less eagerly.
	o.DisableTableStats = true
	o.Experimental.SecondaryCacheSizeBytes = ro.cacheSize()
}

// cacheSize returns the size of an owner's secondary cache, 0 for none.
func (o RemoteOptions) cacheSize() int64 {
	switch {
	case o.CacheSize == 0:
		return 64 << 20
	case o.CacheSize > 0:
		return o.CacheSize
	}
	return 0
}

// lineageStorage is the storage of one locator; see ownerRemote.
type lineageStorage struct {
	*remotestore.Storage
	own   bool // the locator this open creates objects under
	owner *ownerRemote
	loc   remote.Locator
}

func isRefMarker(name string) bool { return strings.Contains(name, ".ref.") }

func (s *lineageStorage) CreateObject(name string) (io.WriteCloser, error) {
	if isRefMarker(name) {
		return discard{}, nil
	}
	if !s.own {
		// Pebble creates objects only under CreateOnSharedLocator; writing
		// into another writer's prefix could replace what it wrote.
		return nil, fmt.Errorf("state: refusing to create %q under another writer's locator", name)
	}
	return s.Storage.CreateObject(name)
}

func (s *lineageStorage) List(prefix, delimiter string) ([]string, error) {
	if isRefMarker(prefix) {
		return nil, nil
	}
	return s.Storage.List(prefix, delimiter)
}

func (s *lineageStorage) Delete(name string) error {
	if isRefMarker(name) || !s.own {
		return nil
	}
	return s.Storage.Delete(name)
}

func (s *lineageStorage) Size(name string) (int64, error) {
	if isRefMarker(name) {
		return 0, nil
	}
	return s.Storage.Size(name)
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
func (discard) Close() error                { return nil }

// creatorID returns the creator id recorded in the remote object catalog
// of the database in dir, or a new random one for a database that has
// none yet. Pebble persists the id with the first remote object and
// refuses to change it, so a restored database keeps its predecessor's;
// uniqueness of object keys comes from the locator, the id only has to be
// set.
func creatorID(dir string) (uint64, error) {
	if _, err := os.Stat(dir); err == nil {
		cat, contents, err := remoteobjcat.Open(vfs.Default, dir)
		if err != nil {
			return 0, err
		}
		if err := cat.Close(); err != nil {
			return 0, err
		}
		if contents.CreatorID.IsSet() {
			return uint64(contents.CreatorID), nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return 0, err
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b[:])>>1 | 1, nil // set, and printable as a positive int64
}

// remoteObjects lists the remote tables db refers to.
func (r *ownerRemote) remoteObjects(owner string, db *pebble.DB) ([]RemoteObject, error) {
	levels, err := db.SSTables()
	if err != nil {
		return nil, err
	}
	type table struct {
		size    uint64
		virtual bool
	}
	tables := make(map[uint64]table)
	for _, level := range levels {
		for _, t := range level {
			if t.BackingType == pebble.BackingTypeLocal {
				continue
			}
			if t.BackingType != pebble.BackingTypeShared {
				return nil, fmt.Errorf("table %s is backed by %v storage, which remote mode does not create", t.FileNum, t.BackingType)
			}
			n := uint64(t.BackingSSTNum)
			prev, seen := tables[n]
			tables[n] = table{size: t.Size, virtual: t.Virtual || (seen && prev.virtual)}
		}
	}
	provider := db.ObjProvider()
	var out []RemoteObject
	for _, meta := range provider.List() {
		t, ok := tables[uint64(meta.DiskFileNum)]
		if !ok || !meta.IsRemote() {
			continue
		}
		delete(tables, uint64(meta.DiskFileNum))
		// Pebble's naming, read back rather than re-implemented.
		path := provider.Path(meta)
		key, ok := r.objectKey(meta.Remote.Locator, path)
		if !ok {
			return nil, fmt.Errorf("remote object %q has no locator of this package", path)
		}
		size := int64(t.size)
		if t.virtual {
			// A virtual table's size is its share of the backing object.
			n, err := provider.Size(meta)
			if err != nil {
				return nil, err
			}
			size = n
		}
		out = append(out, RemoteObject{Owner: owner, Key: key, Size: size})
	}
	if len(tables) > 0 {
		return nil, fmt.Errorf("%d remote tables are missing from the object catalog", len(tables))
	}
	return out, nil
}

func sortObjects(objs []RemoteObject) {
	slices.SortFunc(objs, func(a, b RemoteObject) int { return strings.Compare(a.Key, b.Key) })
}

// RemoteObjects returns the objects in the object store that the
// checkpoint in dir refers to (dir as written by Checkpoint in remote
// mode: one subdirectory per owner), sorted by key. These are the objects
// the checkpoint layer records instead of uploading, and that must exist
// for the checkpoint to be restored. The list is exact: each owner's
// checkpoint is opened read-only and its tables listed; no object is read.
// In local mode, or for a checkpoint without remote tables, it is empty.
func (s *Store) RemoteObjects(ctx context.Context, dir string) ([]RemoteObject, error) {
	if err := s.acquire(); err != nil {
		return nil, fmt.Errorf("state: remote objects of %q: %w", dir, err)
	}
	defer s.release()
	if !s.opts.Remote.enabled() {
		return nil, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("state: remote objects of %q: %w", dir, err)
	}
	var out []RemoteObject
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("state: remote objects of %q: %w", dir, err)
		}
		owner := e.Name()
		if err := ValidateOwnerID(owner); err != nil {
			return nil, fmt.Errorf("state: remote objects of %q: %w", dir, err)
		}
		objs, err := s.checkpointObjects(filepath.Join(dir, owner), owner)
		if err != nil {
			return nil, fmt.Errorf("state: remote objects of %q: owner %q: %w", dir, owner, err)
		}
		out = append(out, objs...)
	}
	sortObjects(out)
	return out, nil
}

func (s *Store) checkpointObjects(dir, owner string) (_ []RemoteObject, err error) {
	r, err := newOwnerRemote(s.opts.Remote, owner)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, r.close()) }()
	o := s.pebbleOptions()
	r.configure(o, s.opts.Remote)
	o.ReadOnly = true
	o.FS = readOnlyFS{vfs.Default}
	o.Experimental.SecondaryCacheSizeBytes = 0
	db, err := pebble.Open(dir, o)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, db.Close()) }()
	return r.remoteObjects(owner, db)
}

// LiveRemoteObjects returns the objects the open databases refer to now,
// sorted by key. Flushes and compactions change the set at any moment; a
// GC uses it together with its grace period (see docs/state.md).
func (s *Store) LiveRemoteObjects() ([]RemoteObject, error) {
	if err := s.acquire(); err != nil {
		return nil, fmt.Errorf("state: live remote objects: %w", err)
	}
	defer s.release()
	s.mu.Lock()
	owners := make([]*Owner, 0, len(s.owners))
	for _, o := range s.owners {
		owners = append(owners, o)
	}
	s.mu.Unlock()
	var out []RemoteObject
	for _, o := range owners {
		if o.remote == nil {
			continue
		}
		objs, err := o.remote.remoteObjects(o.id, o.db)
		if err != nil {
			return nil, fmt.Errorf("state: live remote objects: owner %q: %w", o.id, err)
		}
		out = append(out, objs...)
	}
	sortObjects(out)
	return out, nil
}

// RemotePrefixes returns, for every open owner, the key prefix (ending in
// '/') under which this Store creates its new objects. Nothing but this
// Store writes there, and only this Store knows which of those objects
// its databases still need: a GC run elsewhere must leave the prefix of a
// writer that has not been fenced alone. Empty in local mode.
func (s *Store) RemotePrefixes() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]string, len(s.owners))
	for id, o := range s.owners {
		if o.remote != nil {
			out[id] = o.remote.prefix(o.remote.locator) + "/"
		}
	}
	return out
}

// openDB opens the database of owner id in path, in remote mode if the
// Store is configured so.
func (s *Store) openDB(path, id string) (*pebble.DB, *ownerRemote, error) {
	o := s.pebbleOptions()
	if !s.opts.Remote.enabled() {
		db, err := pebble.Open(path, o)
		return db, nil, err
	}
	creator, err := creatorID(path)
	if err != nil {
		return nil, nil, err
	}
	r, err := newOwnerRemote(s.opts.Remote, id)
	if err != nil {
		return nil, nil, err
	}
	r.configure(o, s.opts.Remote)
	o.EventListener = corruptionListener(s.opts.Logger)
	o.EventListener.BackgroundError = s.onBackgroundError
	db, err := pebble.Open(path, o)
	if err != nil {
		return nil, nil, errors.Join(err, r.close())
	}
	if err := db.SetCreatorID(creator); err != nil {
		return nil, nil, errors.Join(err, closeDB(db, r))
	}
	if err := r.learnSizes(db); err != nil {
		return nil, nil, errors.Join(err, closeDB(db, r))
	}
	return db, r, nil
}

// closeDB closes db, then the storages it used (Pebble never closes them).
func closeDB(db *pebble.DB, r *ownerRemote) error {
	err := db.Close()
	if r != nil {
		err = errors.Join(err, r.close())
	}
	return err
}

// objectKey returns the store key of the remote object Pebble names by
// path ("remote-<locator>://<name>").
func (r *ownerRemote) objectKey(loc remote.Locator, path string) (string, bool) {
	name, ok := strings.CutPrefix(path, "remote-"+string(loc)+"://")
	if !ok || loc == "" {
		return "", false
	}
	return r.prefix(loc) + "/" + name, true
}

// ErrRemoteObject marks a read that failed because an object in the
// store is missing, truncated or corrupt (Pebble's block checksums catch
// corruption). Such an error names the object's key; the data it would
// have returned is never returned.
var ErrRemoteObject = errors.New("state: remote object unreadable")

// explain adds the store key of the object a corruption error is about:
// Pebble names it by locator and object name only.
func (r *ownerRemote) explain(err error) error {
	info := pebble.ExtractDataCorruptionInfo(err)
	if info == nil || !info.IsRemote {
		if errors.Is(err, remotestore.ErrObjectChanged) {
			// Found by a read past the end of an object opened with the
			// MANIFEST's size (remote_sizes.go); the error names the key.
			return fmt.Errorf("%w: %w", ErrRemoteObject, err)
		}
		return err
	}
	key, ok := r.objectKey(info.Locator, info.Path)
	if !ok || strings.Contains(err.Error(), key) {
		return fmt.Errorf("%w: %w", ErrRemoteObject, err)
	}
	return fmt.Errorf("%w %q: %w", ErrRemoteObject, key, err)
}

// corruptionListener replaces Pebble's default reaction to a corrupt or
// missing remote object, which is to call Logger.Fatalf (a panic here):
// the read that found it fails with an error naming the object (see
// explain), and the database stays usable for everything else.
func corruptionListener(l *slog.Logger) *pebble.EventListener {
	el := &pebble.EventListener{
		DataCorruption: func(info pebble.DataCorruptionInfo) {
			l.Error("pebble: corrupt or missing object", "component", "pebble", "path", info.Path, "remote", info.IsRemote, "details", info.Details)
		},
	}
	el.EnsureDefaults(slogLogger{l})
	return el
}

// readOnlyFS is the OS filesystem with every change refused, for opening
// a checkpoint directory without touching it: Pebble's read-only mode
// still takes the directory's LOCK file (creating it), which here is a
// no-op since nothing else writes to a checkpoint.
type readOnlyFS struct{ vfs.FS }

var errReadOnly = errors.New("state: checkpoint directory opened read-only")

func (readOnlyFS) Create(name string, _ vfs.DiskWriteCategory) (vfs.File, error) {
	return nil, fmt.Errorf("create %q: %w", name, errReadOnly)
}
func (readOnlyFS) Link(_, newname string) error {
	return fmt.Errorf("link %q: %w", newname, errReadOnly)
}
func (readOnlyFS) OpenReadWrite(name string, _ vfs.DiskWriteCategory, _ ...vfs.OpenOption) (vfs.File, error) {
	return nil, fmt.Errorf("open %q for writing: %w", name, errReadOnly)
}
func (readOnlyFS) Remove(name string) error { return fmt.Errorf("remove %q: %w", name, errReadOnly) }
func (readOnlyFS) RemoveAll(name string) error {
	return fmt.Errorf("remove %q: %w", name, errReadOnly)
}
func (readOnlyFS) Rename(_, newname string) error {
	return fmt.Errorf("rename to %q: %w", newname, errReadOnly)
}
func (readOnlyFS) ReuseForWrite(_, newname string, _ vfs.DiskWriteCategory) (vfs.File, error) {
	return nil, fmt.Errorf("reuse %q: %w", newname, errReadOnly)
}
func (readOnlyFS) MkdirAll(dir string, _ os.FileMode) error {
	return fmt.Errorf("mkdir %q: %w", dir, errReadOnly)
}
func (readOnlyFS) Lock(string) (io.Closer, error) { return io.NopCloser(nil), nil }
