package state

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tidemark-io/tidemark/internal/fsync"
	"github.com/tidemark-io/tidemark/internal/simhook"
)

// Sentinel errors. Callers branch on them with errors.Is.
var (
	// ErrInvalidOwner reports an owner id that is not a single safe path
	// segment (see ValidateOwnerID).
	ErrInvalidOwner = errors.New("state: invalid owner id")
	// ErrClosed reports an operation on a Store (or one of its owners)
	// after Close.
	ErrClosed = errors.New("state: store closed")
	// ErrUnsupportedFile reports a symlink, device, socket or pipe in a
	// checkpoint directory, or a file outside every owner directory.
	ErrUnsupportedFile = errors.New("state: unsupported file")
)

// formatVersion pins the on-disk format of new databases, so that
// upgrading Pebble does not silently change the format of checkpoints
// while older binaries may still have to restore them (rolling deploys).
// Databases with a newer format on disk are opened at their own format.
const formatVersion = pebble.FormatValueSeparation

// Options configure a Store. The zero value is usable and keeps memory
// modest: about CacheSize + owners × 3 × MemTableSize in the worst case
// (a mutable memtable plus up to two queued for flushing), which with the
// defaults is 8 MiB + 12 MiB per owner. On a 2-core machine shared with
// other work, the defaults (one compaction at a time per owner) are right;
// tests can use MemTableSize of 256 KiB and CacheSize of 1 MiB. Measured
// (8 owners × 100,000 keys of 16+100 bytes, then a checkpoint): peak RSS
// of the whole test process 124 MiB with the zero Options, 36 MiB with
// those test values (which write about 2.7× slower: more flushes).
type Options struct {
	// MemTableSize is the size of each owner's memtable, in bytes.
	// Zero means 4 MiB (Pebble's default).
	MemTableSize uint64
	// CacheSize is the size of the block cache shared by all owners, in
	// bytes. Zero means 8 MiB.
	CacheSize int64
	// MaxOpenFiles bounds the file-descriptor cache shared by all owners.
	// Zero means 1000.
	MaxOpenFiles int
	// CompactionConcurrency is the number of compactions each owner may
	// run at once. Zero means 1.
	CompactionConcurrency int
	// SyncWrites fsyncs the WAL on every write. Off by default: the
	// checkpoint, not the write, is the durability point.
	SyncWrites bool
	// NoFlushOnCheckpoint skips the memtable flush before each owner's
	// checkpoint. The checkpoint then carries unflushed writes in its WAL,
	// a private file re-uploaded by every checkpoint (up to MemTableSize
	// per owner), instead of in new shared SSTs.
	NoFlushOnCheckpoint bool
	// Logger receives Pebble's log messages. Nil discards them.
	Logger *slog.Logger
	// ReadOnly opens every owner read-only, for looking into a checkpoint
	// without a job: no flush, no compaction, and in remote mode no object
	// is created. Writes fail, and so does opening an owner that does not
	// exist.
	ReadOnly bool
	// Remote puts the Store in remote mode: SSTs are created in an object
	// store instead of on local disk (see "Remote mode" in the package
	// doc). The zero value is local mode.
	Remote RemoteOptions
}

func (o Options) withDefaults() Options {
	if o.MemTableSize == 0 {
		o.MemTableSize = 4 << 20
	}
	if o.CacheSize == 0 {
		o.CacheSize = 8 << 20
	}
	if o.MaxOpenFiles == 0 {
		o.MaxOpenFiles = 1000
	}
	if o.CompactionConcurrency == 0 {
		o.CompactionConcurrency = 1
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Store is the keyed state of several owners, one Pebble database per
// owner under one directory. It is safe for concurrent use.
type Store struct {
	dir       string
	opts      Options
	cache     *pebble.Cache
	fileCache *pebble.FileCache

	// life guards closed. Every operation registers in inflight while
	// holding it in read mode, so Close (which sets closed in write mode
	// and then waits for inflight) never closes a database under a running
	// operation: Pebble panics on a closed database. A registered
	// operation never blocks on life again, so an operation nested in a
	// Scan loop cannot deadlock against Close; it fails with ErrClosed.
	life     sync.RWMutex
	closed   bool
	broken   error         // set by a failed write (see ErrBroken)
	brokenCh chan struct{} // closed when broken is set
	inflight sync.WaitGroup

	mu     sync.Mutex // guards owners and serializes opening them
	owners map[string]*Owner
}

// Open opens (creating if needed) the Store in dir and every owner
// database already in it. Subdirectories of dir must be owner
// directories; other entries (regular files, symlinks) are ignored, so
// dir must be used by the Store alone.
func Open(dir string, opts Options) (*Store, error) {
	opts = opts.withDefaults()
	if err := opts.Remote.validate(); err != nil {
		return nil, fmt.Errorf("state: open %q: %w", dir, err)
	}
	if !opts.ReadOnly {
		if err := fsync.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("state: open %q: %w", dir, err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("state: open %q: %w", dir, err)
	}
	var ids []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if err := ValidateOwnerID(e.Name()); err != nil {
			return nil, fmt.Errorf("state: open %q: directory %q: %w", dir, e.Name(), err)
		}
		ids = append(ids, e.Name())
	}
	s := &Store{
		dir:       dir,
		opts:      opts,
		cache:     pebble.NewCache(opts.CacheSize),
		fileCache: pebble.NewFileCache(2*runtime.GOMAXPROCS(0), pebble.FileCacheSize(opts.MaxOpenFiles)),
		owners:    make(map[string]*Owner),
		brokenCh:  make(chan struct{}),
	}
	for _, id := range ids {
		if _, err := s.Owner(id); err != nil {
			return nil, errors.Join(err, s.Close())
		}
	}
	return s, nil
}

// Dir returns the directory the Store lives in.
func (s *Store) Dir() string { return s.dir }

// Owner returns the state of owner id, opening (and creating) its
// database under <dir>/<id> on first use. The same *Owner is returned for
// the same id until Close.
func (s *Store) Owner(id string) (*Owner, error) {
	if err := ValidateOwnerID(id); err != nil {
		return nil, fmt.Errorf("state: owner %q: %w", id, err)
	}
	if err := s.acquire(); err != nil {
		return nil, fmt.Errorf("state: owner %q: %w", id, err)
	}
	defer s.release()
	s.mu.Lock()
	defer s.mu.Unlock()
	if o, ok := s.owners[id]; ok {
		return o, nil
	}
	path := filepath.Join(s.dir, id)
	// A new owner directory must survive a crash together with the files
	// Pebble fsyncs inside it: Pebble syncs its own directory, not ours.
	_, statErr := os.Stat(path)
	db, rem, err := s.openDB(path, id)
	if err != nil {
		return nil, fmt.Errorf("state: owner %q: open: %w", id, err)
	}
	if errors.Is(statErr, fs.ErrNotExist) {
		if err := fsync.Dir(s.dir); err != nil {
			return nil, errors.Join(fmt.Errorf("state: owner %q: %w", id, err), closeDB(db, rem))
		}
	}
	o := &Owner{s: s, id: id, db: db, remote: rem}
	s.owners[id] = o
	return o, nil
}

// Owners returns the ids of the owners open in the Store, sorted.
func (s *Store) Owners() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.owners))
	for id := range s.owners {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Close waits for running operations, then closes every owner database.
// Later operations fail with ErrClosed. Close is idempotent.
func (s *Store) Close() error {
	s.life.Lock()
	if s.closed {
		s.life.Unlock()
		return nil
	}
	s.closed = true
	broken := s.broken
	s.life.Unlock()
	s.inflight.Wait()
	if broken != nil {
		// Pebble holds its commit lock since the failed write: closing
		// the databases would block forever. The process is about to
		// stop; the next run reopens the state from a checkpoint.
		return broken
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, id := range slices.Sorted(maps.Keys(s.owners)) {
		if err := closeDB(s.owners[id].db, s.owners[id].remote); err != nil {
			errs = append(errs, fmt.Errorf("state: close owner %q: %w", id, err))
		}
	}
	s.owners = nil
	// The databases hold their own references; drop the Store's.
	s.fileCache.Unref()
	s.cache.Unref()
	return errors.Join(errs...)
}

func (s *Store) acquire() error {
	s.life.RLock()
	defer s.life.RUnlock()
	if s.closed {
		return ErrClosed
	}
	if s.broken != nil {
		return s.broken
	}
	s.inflight.Add(1)
	return nil
}

func (s *Store) release() { s.inflight.Done() }

func (s *Store) pebbleOptions() *pebble.Options {
	conc := s.opts.CompactionConcurrency
	o := &pebble.Options{
		FS:                          noRecycleFS{vfs.Default},
		Cache:                       s.cache,
		FileCache:                   s.fileCache,
		MaxOpenFiles:                s.opts.MaxOpenFiles,
		MemTableSize:                s.opts.MemTableSize,
		MemTableStopWritesThreshold: 2,
		FormatMajorVersion:          formatVersion,
		CompactionConcurrencyRange:  func() (int, int) { return conc, conc },
		Logger:                      slogLogger{s.opts.Logger},
		EventListener:               &pebble.EventListener{BackgroundError: s.onBackgroundError},
		ReadOnly:                    s.opts.ReadOnly,
		// Off but in the deterministic simulation (package simhook).
		DisableAutomaticCompactions: simhook.NoCompactions(),
	}
	o.EventListener.EnsureDefaults(slogLogger{s.opts.Logger})
	return o
}

func (s *Store) writeOptions() *pebble.WriteOptions {
	if s.opts.SyncWrites {
		return pebble.Sync
	}
	return pebble.NoSync
}

// ValidateOwnerID reports whether id can name an owner: one path segment
// of 1–255 bytes of [A-Za-z0-9._-], not "." or "..". The error wraps
// ErrInvalidOwner.
func ValidateOwnerID(id string) error {
	if id == "" || len(id) > 255 {
		return fmt.Errorf("%w: %q must be 1-255 bytes", ErrInvalidOwner, id)
	}
	if id == "." || id == ".." {
		return fmt.Errorf("%w: %q", ErrInvalidOwner, id)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
		default:
			return fmt.Errorf("%w: %q has byte %q outside [A-Za-z0-9._-]", ErrInvalidOwner, id, c)
		}
	}
	return nil
}

// slogLogger adapts a *slog.Logger to pebble.Logger.
type slogLogger struct{ l *slog.Logger }

func (l slogLogger) Infof(format string, args ...any) {
	l.l.Info(fmt.Sprintf(format, args...), "component", "pebble")
}

func (l slogLogger) Errorf(format string, args ...any) {
	l.l.Error(fmt.Sprintf(format, args...), "component", "pebble")
}

// Fatalf is called by Pebble on invariant violations, after which the
// database must not be used: log and panic (Pebble's own default exits
// the process).
func (l slogLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	l.l.Error(msg, "component", "pebble", "fatal", true)
	panic("state: pebble fatal: " + msg)
}
