package filestore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/tidemark-io/tidemark/blobstore"
)

// ErrKeyConflict is returned when a key cannot be written because the
// filesystem cannot represent it next to an existing key: writing "a/b"
// while "a/b/c" exists (so "a/b" is a directory), or "a/b/c" while "a/b"
// exists (so "a/b" is a file).
var ErrKeyConflict = errors.New("filestore: key conflicts with an existing key (a key cannot also be a directory of other keys)")

// copyBufferSize is the size of the buffer a write copies through: large
// enough that big objects take few syscalls, small enough that many
// concurrent writes stay cheap.
const copyBufferSize = 1 << 20

// ErrLocked is returned when a write could not take a directory's lock
// within Options.LockTimeout because another process (or another Store)
// holds it: typically a process that was stopped (SIGSTOP, docker pause,
// a debugger) or hung in the middle of a write.
var ErrLocked = errors.New("filestore: directory locked by another process")

// ErrStoreNotFound is returned, with Options.MustExist, by every operation
// on a store whose root directory does not exist, so that a read-only
// caller can tell a mistyped path from an empty store.
var ErrStoreNotFound = errors.New("filestore: store directory does not exist")

// DefaultLockTimeout is Options.LockTimeout when zero. The lock is held
// only across a condition check, a rename and a directory fsync, so a
// healthy writer keeps it for milliseconds; the margin is for a disk
// whose fsyncs stall under load.
const DefaultLockTimeout = 30 * time.Second

// Options configure a Store. The zero value is the default.
type Options struct {
	// LockTimeout bounds how long a write waits for the lock of the
	// key's directory (docs/s3.md, "Conditional writes across processes") before it fails
	// with ErrLocked; DefaultLockTimeout if zero, no bound but the
	// context's if negative. The wait always ends when the context does.
	LockTimeout time.Duration
	// Logger, if set, is told at once when a write finds a directory's
	// lock held by another process and waits for it (a frozen process
	// would otherwise leave the caller silent for LockTimeout). The
	// URL opener takes it from blobstore.LoggerFromContext.
	Logger *slog.Logger
	// MustExist makes a missing root directory an error (ErrStoreNotFound)
	// for every operation, reads and writes alike, instead of an empty
	// store that the first write creates. Read-only tools set it.
	MustExist bool
}

// Store is a [blobstore.Blobstore] on a directory tree. It holds no open
// files between calls, so any number of Stores and processes may share a
// directory. All methods are safe for concurrent use.
type Store struct {
	dir         string
	lockTimeout time.Duration // 0: none
	mustExist   bool
	logger      *slog.Logger
	bufs        sync.Pool // *[]byte of copyBufferSize

	// beforeRename, if set (by tests only), runs in a write between the
	// condition check and the rename: it widens the window a missing lock
	// would let another writer into.
	beforeRename func()
}

var _ blobstore.Blobstore = (*Store)(nil)

// New returns a Store rooted at dir, made absolute, with the default
// Options. It does no I/O: the directory is created by the first write,
// and reads before that find nothing.
func New(dir string) (*Store, error) { return NewWithOptions(dir, Options{}) }

// NewWithOptions returns a Store rooted at dir, made absolute, configured
// by opts. It does no I/O.
func NewWithOptions(dir string, opts Options) (*Store, error) {
	if dir == "" {
		return nil, errors.New("filestore: new: empty directory")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("filestore: new %q: %w", dir, err)
	}
	s := &Store{dir: abs, mustExist: opts.MustExist, logger: opts.Logger}
	switch {
	case opts.LockTimeout == 0:
		s.lockTimeout = DefaultLockTimeout
	case opts.LockTimeout > 0:
		s.lockTimeout = opts.LockTimeout
	}
	s.bufs.New = func() any {
		b := make([]byte, copyBufferSize)
		return &b
	}
	return s, nil
}

// Dir returns the absolute root directory of the store.
func (s *Store) Dir() string { return s.dir }

// errNoRoot reports that the root directory does not exist yet, which
// reads treat as an empty store.
var errNoRoot = errors.New("filestore: root directory does not exist")

// openRoot opens the root directory. With create it makes the directory
// (and fsyncs its entry into its parent) if it is missing; without,
// a missing directory is errNoRoot.
func (s *Store) openRoot(create bool) (*os.Root, error) {
	r, err := os.OpenRoot(s.dir)
	if err == nil {
		return r, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if s.mustExist {
		return nil, fmt.Errorf("%w: %s", ErrStoreNotFound, s.dir)
	}
	if !create {
		return nil, errNoRoot
	}
	// Note which ancestors are missing, so that after creating them each
	// one's entry is made durable in its parent, as for every directory a
	// write creates.
	var created []string
	for p := s.dir; ; p = filepath.Dir(p) {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) || p == filepath.Dir(p) {
			break
		}
		created = append(created, p)
	}
	if err := os.MkdirAll(s.dir, 0o777); err != nil {
		return nil, err
	}
	for i := len(created) - 1; i >= 0; i-- {
		if err := syncDir(filepath.Dir(created[i])); err != nil {
			return nil, err
		}
	}
	return os.OpenRoot(s.dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// isMissing reports whether err from resolving a path means that nothing
// is there: the path or one of its directories does not exist, or a
// directory component is a file.
func isMissing(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, errNoRoot)
}

// Get opens the object at key for reading. Since writes replace files by
// rename, the reader sees the version that was current when Get returned,
// even if the key is overwritten or deleted meanwhile. Reads fail once ctx
// is done.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	f, _, err := s.open(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("filestore: get %q: %w", key, err)
	}
	return &reader{ctx: ctx, r: f, c: f}, nil
}

var _ blobstore.InfoGetter = (*Store)(nil)

// GetWithInfo is Get that also returns the object's info, taken from the
// open file: it is the info of the version read, even if a write replaces
// the object meanwhile.
func (s *Store) GetWithInfo(ctx context.Context, key string) (io.ReadCloser, blobstore.ObjectInfo, error) {
	f, fi, err := s.open(ctx, key)
	if err != nil {
		return nil, blobstore.ObjectInfo{}, fmt.Errorf("filestore: get %q: %w", key, err)
	}
	return &reader{ctx: ctx, r: f, c: f}, objectInfo(key, fi), nil
}

// GetRange opens length bytes of the object at key starting at offset. A
// negative length reads to the end; a range past the end is cut at the
// end; one starting at or past the end reads nothing.
func (s *Store) GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	f, fi, err := s.open(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("filestore: get range %q: %w", key, err)
	}
	size := fi.Size()
	if offset < 0 {
		f.Close()
		return nil, fmt.Errorf("filestore: get range %q: negative offset %d", key, offset)
	}
	n := max(size-offset, 0)
	if length >= 0 && length < n {
		n = length
	}
	return &reader{ctx: ctx, r: io.NewSectionReader(f, offset, n), c: f}, nil
}

// open validates key and opens its file, which must be a regular file.
func (s *Store) open(ctx context.Context, key string) (*os.File, fs.FileInfo, error) {
	if err := blobstore.ValidateKey(key); err != nil {
		return nil, nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	root, err := s.openRoot(false)
	if err != nil {
		if isMissing(err) {
			return nil, nil, blobstore.ErrNotFound
		}
		return nil, nil, err
	}
	defer root.Close()
	f, err := root.Open(key)
	if err != nil {
		if isMissing(err) {
			return nil, nil, blobstore.ErrNotFound
		}
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		// A directory here holds other keys ("a/b" when "a/b/c" exists);
		// there is no object named key.
		f.Close()
		return nil, nil, blobstore.ErrNotFound
	}
	return f, fi, nil
}

// reader streams an open file and fails once its context is done, as a
// network store's body would.
type reader struct {
	ctx context.Context
	r   io.Reader
	c   io.Closer
}

func (r *reader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}

func (r *reader) Close() error { return r.c.Close() }

// Stat returns the object's size, ETag and modification time (the time
// its write committed).
func (s *Store) Stat(ctx context.Context, key string) (blobstore.ObjectInfo, error) {
	info, err := s.stat(ctx, key)
	if err != nil {
		return blobstore.ObjectInfo{}, fmt.Errorf("filestore: stat %q: %w", key, err)
	}
	return info, nil
}

func (s *Store) stat(ctx context.Context, key string) (blobstore.ObjectInfo, error) {
	if err := blobstore.ValidateKey(key); err != nil {
		return blobstore.ObjectInfo{}, err
	}
	if err := ctx.Err(); err != nil {
		return blobstore.ObjectInfo{}, err
	}
	root, err := s.openRoot(false)
	if err != nil {
		if isMissing(err) {
			return blobstore.ObjectInfo{}, blobstore.ErrNotFound
		}
		return blobstore.ObjectInfo{}, err
	}
	defer root.Close()
	fi, err := root.Stat(key)
	if err != nil {
		if isMissing(err) {
			return blobstore.ObjectInfo{}, blobstore.ErrNotFound
		}
		return blobstore.ObjectInfo{}, err
	}
	if !fi.Mode().IsRegular() {
		return blobstore.ObjectInfo{}, blobstore.ErrNotFound
	}
	return objectInfo(key, fi), nil
}

// Exists reports whether an object is stored at key.
func (s *Store) Exists(ctx context.Context, key string) (bool, error) {
	_, err := s.stat(ctx, key)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, blobstore.ErrNotFound):
		return false, nil
	default:
		return false, fmt.Errorf("filestore: exists %q: %w", key, err)
	}
}

func objectInfo(key string, fi fs.FileInfo) blobstore.ObjectInfo {
	return blobstore.ObjectInfo{Key: key, Size: fi.Size(), ETag: etagOf(fi), ModTime: fi.ModTime()}
}
