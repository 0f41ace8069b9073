package blobstorage

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/encrypted"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/internal/localfs"
	"github.com/tidemark-io/tidemark/internal/pebblefile"
)

// Defaults of Options.
const (
	DefaultConcurrency = 8
	DefaultKeep        = 3
	DefaultGrace       = time.Hour
	DefaultPinTTL      = time.Hour
)

// ErrNotWriter is returned (wrapped) by Save and UpdateStatus of a
// Storage on which Acquire was never called (GC needs no writer role).
var ErrNotWriter = errors.New("not the writer: call Acquire first")

// Options configure a Storage. The zero value is usable: every
// zero field takes the default documented on it.
type Options struct {
	// Concurrency bounds parallel uploads (Save) and downloads (Restore).
	// Default: DefaultConcurrency (8).
	Concurrency int
	// Keep is the number of completed checkpoints GC retains.
	// Default: DefaultKeep (3).
	Keep int
	// Grace is how old a leftover (a record newer than the latest
	// completed one, files without a record, an unreferenced shared file,
	// an incomplete multipart upload) must be before GC deletes it; it
	// must exceed the longest Save. Default: DefaultGrace (1h).
	Grace time.Duration
	// PinTTL is how long a restore pin protects its checkpoint from GC; it
	// must exceed the longest Restore. Default: DefaultPinTTL (1h).
	PinTTL time.Duration
	// WriterName identifies this process in the _writer object
	// (diagnostics only). Default: "<hostname>-<pid>".
	WriterName string
	// Logger receives debug logs of GC deletions. Default: discard.
	Logger *slog.Logger
	// Observer, if set, hears of every Save, Restore, GC and fencing (for
	// metrics; see package metrics). Default: none.
	Observer Observer
	// BufferedRestore makes Restore write files through the page cache
	// instead of with direct I/O (see directwrite.go): for a disk slower
	// than the store, where a buffered restore ends at the store's speed
	// and leaves the writing to the kernel, and a direct one waits for
	// the disk. Default: direct where the filesystem supports it.
	BufferedRestore bool
	// Classify reports whether a state file, named by its slash-separated
	// path relative to its owner's state directory, is immutable once
	// written and can therefore be shared by later checkpoints. Default:
	// Pebble table and blob file names (digits, then ".sst" or ".blob"),
	// the rule state.Classify applies.
	Classify func(relPath string) bool
	// FS is the file system Restore writes state directories to (with
	// their boot markers) and RemoveStateDir removes them from. Save
	// reads state directories with package os, so FS must write through
	// to files the OS sees. Default: the OS's (localfs.OS); the
	// deterministic simulation passes a disk that fills up and loses
	// unsynced writes in a machine crash.
	FS localfs.FS
}

func (o Options) withDefaults() Options {
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.Keep <= 0 {
		o.Keep = DefaultKeep
	}
	if o.Grace <= 0 {
		o.Grace = DefaultGrace
	}
	if o.PinTTL <= 0 {
		o.PinTTL = DefaultPinTTL
	}
	if o.WriterName == "" {
		host, _ := os.Hostname()
		o.WriterName = host + "-" + strconv.Itoa(os.Getpid())
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Observer == nil {
		o.Observer = nopObserver{}
	}
	if o.Classify == nil {
		o.Classify = pebblefile.Immutable
	}
	o.FS = localfs.Default(o.FS)
	return o
}

// FileRef locates one state file of a checkpoint in the store.
type FileRef struct {
	// Path is the file's slash-separated path relative to its owner's
	// state directory.
	Path string `json:"path"`
	// Size is the file's length in bytes.
	Size int64 `json:"size"`
	// SHA256 is the hex-encoded SHA-256 of the content.
	SHA256 string `json:"sha256"`
	// Key is the blob key holding the content: under shared/ for
	// immutable files (possibly uploaded by an earlier checkpoint), under
	// checkpoints/<id>/private/ otherwise.
	Key string `json:"key"`
}

// Record is a checkpoint record as a Storage stores it: the
// checkpoint.CheckpointData fields, the epoch of the writer that saved it, and where
// every state file lives.
type Record struct {
	*checkpoint.CheckpointData
	// Epoch is the writer epoch of the Save that wrote the files.
	Epoch uint64 `json:"epoch"`
	// Files maps each owner of checkpoint.CheckpointData.StateDirs to its files.
	Files map[string][]FileRef `json:"files"`
	// Workers is the assignment the checkpoint was saved with (see
	// Storage.Assign): owner → worker id, for the owners whose state came
	// from a worker's part. Empty when one process saved everything.
	Workers map[string]string `json:"workers,omitempty"`
	// Remote maps owners in remote mode to the objects under RemotePrefix
	// their state references (see UseRemote): owned by the checkpoint,
	// not uploaded by it.
	Remote map[string][]RemoteRef `json:"remote,omitempty"`
	// CompletedAt is when the writer completed the checkpoint (wrote
	// the record with a completed status), on its clock; zero for a
	// prepared one and in records written before the field existed.
	// A Replicator measures the recovery point from it.
	CompletedAt time.Time `json:"completed_at,omitzero"`
	// EncryptionKeyID is the id of the master key the checkpoint's files
	// are encrypted under, when the Storage's Blobstore encrypts them on
	// the client side (package blobstore/encrypted); empty for plain
	// files and in records written before the field existed. Restore
	// refuses, naming it, a store without that key before it changes
	// anything.
	EncryptionKeyID string `json:"encryption_key_id,omitempty"`
}

// pointer is the content of _latest and _latest-completed. An empty
// ID means "no checkpoint yet" (written by Acquire to fence the pointer).
type pointer struct {
	ID    string `json:"id"`
	Epoch uint64 `json:"epoch"`
}

// writerRecord is the content of _writer.
type writerRecord struct {
	Epoch  uint64    `json:"epoch"`
	Writer string    `json:"writer"`
	Since  time.Time `json:"since"`
}

// Storage implements checkpoint.Storage on a blobstore.Blobstore, so that
// checkpoints outlive the node that took them (the key layout is in the
// package documentation).
//
// The local directory holds StateDir(id) = <localDir>/<id>.state, the
// working copy of native state, exactly as in FileStorage: Save uploads
// it, Restore downloads it on a node that does not have it.
//
// # Writer and fencing
//
// Only one Storage (across every process) writes at a time: Acquire
// takes the next epoch in _writer by compare-and-swap and then rewrites
// both pointers with it. Every pointer move is a compare-and-swap that
// refuses a pointer carrying a greater epoch, and every write starts by
// checking that _writer still holds the ETag this Storage wrote, so a
// writer that was cut off and replaced (a zombie) gets checkpoint.ErrFenced instead
// of moving pointers or deleting files. Loads need no writer role.
//
// # Incremental saves
//
// Files the Classify option calls immutable are uploaded once under a key
// unique to the checkpoint and epoch that first uploaded them; later
// checkpoints reference that key. A Storage remembers, per file
// identity (device, inode, size, modification time), which key holds a
// file, so the hard-linked, unchanged tables of a Pebble checkpoint are
// not uploaded again.
type Storage struct {
	bs blobstore.Blobstore
	// requests counts the requests made through bs (SaveStats).
	requests *requestCounter
	// files reads state files: through blobstore.WithResumingReads, so
	// that a connection lost mid-body resumes (files are immutable and
	// their digests are checked, so a resumed read cannot pass unnoticed).
	files    blobstore.Blobstore
	localDir string
	opts     Options

	// mu serialises the writes (Acquire, Save, UpdateStatus, GC): the
	// writer's own GC never runs beside its own Save (see planGC).
	mu         sync.Mutex
	probed     bool              // the store's conditional writes were checked
	epoch      uint64            // 0: Acquire not called
	writerETag string            // ETag of the _writer we wrote
	fenced     bool              // saw checkpoint.ErrFenced; sticky until Acquire
	recordETag map[string]string // id → ETag of the record this writer last wrote
	assign     Assignment        // owners saved from workers' parts (parts.go)
	known      map[string]uint64 // shared key → epoch whose record referenced it (parts.go)
	remote     RemoteState       // UseRemote; nil: local mode
	imported   *importedRemote   // set by SaveImported for its Save
	// remoteKnown maps remote objects a Save checked to the epoch they
	// were known to exist in (GC forgets what it deletes); nil until then.
	remoteKnown map[string]uint64
	// job is the job of the latest checkpoint (Save); nil until read,
	// again after Acquire. jobHint is what the last Load of _latest
	// found, under writer generation gen (bumped by every claim of the
	// role), so that Save need not read it again.
	job     *jobOfStore
	jobHint atomic.Pointer[jobOfStore]
	gen     atomic.Uint64

	cache fileCache
}

// Storage implements checkpoint.Storage and each of its optional capabilities.
var (
	_ checkpoint.Storage         = (*Storage)(nil)
	_ checkpoint.WriterRole      = (*Storage)(nil)
	_ checkpoint.Restorer        = (*Storage)(nil)
	_ checkpoint.ArchiveSource   = (*Storage)(nil)
	_ checkpoint.RemoteImporter  = (*Storage)(nil)
	_ checkpoint.StateDirRemover = (*Storage)(nil)
	_ checkpoint.BlobstoreBacked = (*Storage)(nil)
)

// New returns a Storage keeping checkpoints in bs and
// local state directories under localDir. bs is used as is: prefix it
// with blobstore.WithPrefix when several jobs share a bucket. It does no
// I/O; call Acquire before the first Save.
func New(bs blobstore.Blobstore, localDir string, opts Options) *Storage {
	rc := &requestCounter{Blobstore: bs}
	return &Storage{
		bs:         rc,
		requests:   rc,
		files:      blobstore.WithResumingReads(rc, blobstore.DefaultReadResumptions),
		localDir:   localDir,
		opts:       opts.withDefaults(),
		recordETag: map[string]string{},
		cache:      fileCache{m: map[fileIdent]cachedFile{}},
	}
}

// Blobstore returns the store the checkpoints live in.
func (s *Storage) Blobstore() blobstore.Blobstore { return s.requests.Blobstore }

// LocalDir returns the directory holding the local state directories.
func (s *Storage) LocalDir() string { return s.localDir }

// StateDir returns localDir/<id>.state, the local root of checkpoint id's
// native state directories, or "" for an id checkpoint.ValidateID rejects.
func (s *Storage) StateDir(id string) string {
	if checkpoint.ValidateID(id) != nil {
		return ""
	}
	return filepath.Join(s.localDir, checkpoint.StateDirName(id))
}

// RemoveStateDir removes the local state directory of checkpoint id
// (StateDir) and what Restore keeps beside it (the marker of a directory
// restored unsynced), for a job that prunes its local copies of older
// checkpoints. The store is not touched. A directory that is not there is
// no error.
func (s *Storage) RemoveStateDir(id string) error {
	if err := checkpoint.ValidateID(id); err != nil {
		return fmt.Errorf("blobstorage: remove state dir: %w", err)
	}
	dir := s.StateDir(id)
	if err := s.opts.FS.RemoveAll(dir); err != nil {
		return fmt.Errorf("blobstorage: remove state dir %q: %w", id, err)
	}
	if err := s.opts.FS.Remove(bootMarker(dir)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("blobstorage: remove state dir %q: %w", id, err)
	}
	return nil
}

// PruneLocal removes from the local directory every state directory but
// keep's (keep "" keeps none), with what Restore keeps beside one (its
// boot marker), and what a crash left of a Restore: its temporary
// directories and boot markers, and markers whose directory is gone. A
// partly downloaded state is as large as the state: a process that
// crashes while restoring, again and again, fills its disk unless
// something removes them. Call it when no Restore of this local directory
// runs, as a job does at start once it has restored what it resumes
// from. The store is not touched; entries of other names are left alone.
func (s *Storage) PruneLocal(keep string) error {
	if keep != "" {
		if err := checkpoint.ValidateID(keep); err != nil {
			return fmt.Errorf("blobstorage: prune local: %w", err)
		}
	}
	ents, err := s.opts.FS.ReadDir(s.localDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("blobstorage: prune local: %w", err)
	}
	keepDir := ""
	if keep != "" {
		keepDir = filepath.Base(s.StateDir(keep))
	}
	for _, e := range ents {
		name := e.Name()
		if !isLocalLeftover(name) || keepDir != "" && (name == keepDir || name == bootMarker(keepDir)) {
			continue
		}
		if err := s.opts.FS.RemoveAll(filepath.Join(s.localDir, name)); err != nil {
			return fmt.Errorf("blobstorage: prune local: %w", err)
		}
	}
	return s.opts.FS.SyncDir(s.localDir)
}

// isLocalLeftover reports whether name, an entry of the local directory,
// is one PruneLocal may remove: <id>.state, <id>.state.boot, or a
// temporary name of either (".<id>.state.tmp-…", ".<id>.state.boot.tmp-…").
func isLocalLeftover(name string) bool {
	if tmp, ok := strings.CutPrefix(name, "."); ok {
		i := strings.Index(tmp, ".tmp-")
		if i < 0 {
			return false
		}
		name = tmp[:i]
	}
	name = strings.TrimSuffix(name, bootMarker(""))
	id, ok := strings.CutSuffix(name, strings.TrimPrefix(checkpoint.StateDirName(stateDirProbeID), stateDirProbeID))
	return ok && checkpoint.ValidateID(id) == nil
}

// stateDirProbeID is a valid id, for the suffix StateDirName adds.
const stateDirProbeID = "ckpt-00000000000000000000"

// Epoch returns the writer epoch taken by the last Acquire, or 0.
func (s *Storage) Epoch() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.epoch
}

// getJSON reads key into v. With withETag it also returns the ETag of the
// content read, for a compare-and-swap (see readSmall).
func (s *Storage) getJSON(ctx context.Context, key string, v any, withETag bool) (string, error) {
	b, etag, err := s.readSmall(ctx, key, withETag)
	if err != nil {
		return "", err
	}
	if err := json.Unmarshal(b, v); err != nil {
		// Tidemark wrote it as JSON: one that does not decode is damaged.
		return "", fmt.Errorf("%w: decode %q: %w", ErrCorrupt, key, err)
	}
	return etag, nil
}

// getBytes reads a record, a part or a pointer, refusing one over
// checkpoint.MaxRecordBytes before holding more than that: whoever can
// write to the store can make any of them huge.
//
// A read that fails its checksum is tried again, after a short pause:
// these objects are replaced while others read them (a pointer moved, a
// record's status), and a server that does not read atomically can pair
// the new object's checksum with the old one's bytes (versitygw v1.8.0
// did in 2 of 3 GETs racing a PUT of the key). A damaged object fails
// every attempt.
func (s *Storage) getBytes(ctx context.Context, key string) ([]byte, error) {
	b, _, err := s.readSmall(ctx, key, false)
	return b, err
}

// readSmall is getBytes that, with withETag, also returns the ETag of
// the content read: with it in one request where the store can
// (blobstore.GetWithInfo), else from a Stat before the Get, whose ETag
// is then no newer than the content, so a compare-and-swap on it fails
// rather than act on stale content. A read that moves nothing needs no
// ETag: one Get.
func (s *Storage) readSmall(ctx context.Context, key string, withETag bool) (b []byte, etag string, err error) {
	pause := 10 * time.Millisecond
	for i := 1; ; i++ {
		b, etag, err = s.readSmallOnce(ctx, key, withETag)
		if !errors.Is(err, blobstore.ErrChecksum) || i == smallReadAttempts {
			return b, etag, err
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, "", err
		case <-t.C:
		}
		pause *= 2
	}
}

// smallReadAttempts is how often getBytes reads an object that fails its
// checksum (pauses of 10, 20, 40… ms between).
const smallReadAttempts = 6

func (s *Storage) readSmallOnce(ctx context.Context, key string, withETag bool) ([]byte, string, error) {
	var rc io.ReadCloser
	var info blobstore.ObjectInfo
	var err error
	if withETag {
		rc, info, err = blobstore.GetWithInfo(ctx, s.bs, key)
	} else {
		rc, err = s.bs.Get(ctx, key)
	}
	if err != nil {
		return nil, "", err
	}
	defer rc.Close()
	b, err := checkpoint.ReadRecordBytes(rc)
	return b, info.ETag, err
}

func encodeJSON(v any) []byte {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		panic(err) // only plain structs are encoded here
	}
	return append(b, '\n')
}

// readPointer returns the pointer named name, and its ETag with
// withETag (for a compare-and-swap); ok is false when the pointer object
// does not exist.
func (s *Storage) readPointer(ctx context.Context, name string, withETag bool) (p pointer, etag string, ok bool, err error) {
	etag, err = s.getJSON(ctx, name, &p, withETag)
	if errors.Is(err, blobstore.ErrNotFound) {
		return pointer{}, "", false, nil
	}
	if err != nil {
		return pointer{}, "", false, fmt.Errorf("read pointer %s: %w", name, err)
	}
	if p.ID != "" {
		if err := checkpoint.ValidateID(p.ID); err != nil {
			// Only valid ids are ever written: this pointer is damaged.
			return pointer{}, "", false, fmt.Errorf("read pointer %s: %w: %w", name, ErrCorrupt, err)
		}
	}
	return p, etag, true, nil
}

// readRecord reads the record of id (one Get). A missing record wraps
// checkpoint.ErrNotFound.
func (s *Storage) readRecord(ctx context.Context, id string) (*Record, error) {
	rec, _, err := s.readRecordWith(ctx, id, false)
	return rec, err
}

// readRecordETag reads the record of id and the ETag it had, for a
// compare-and-swap on it (see readSmall).
func (s *Storage) readRecordETag(ctx context.Context, id string) (*Record, string, error) {
	return s.readRecordWith(ctx, id, true)
}

func (s *Storage) readRecordWith(ctx context.Context, id string, withETag bool) (*Record, string, error) {
	b, etag, err := s.readSmall(ctx, recordKey(id), withETag)
	if errors.Is(err, blobstore.ErrNotFound) {
		return nil, "", checkpoint.ErrNotFound
	}
	if err != nil {
		return nil, "", err
	}
	rec, err := decodeRecord(b)
	if err != nil {
		// A record a writer wrote is decodable: this one is damaged.
		return nil, "", fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if rec.ID != id {
		return nil, "", fmt.Errorf("%w: the record names id %q", ErrCorrupt, rec.ID)
	}
	return rec, etag, nil
}

// validateFiles checks the file references of a record, which a restore
// turns into local paths and reads: each owner has a state dir, each path
// is valid (checkpoint.ValidatePath) and appears once, each key is a valid
// key, each size is not negative and each digest is a SHA-256.
func validateFiles(d *checkpoint.CheckpointData, files map[string][]FileRef) error {
	for owner, refs := range files {
		if _, ok := d.StateDirs[owner]; !ok {
			return fmt.Errorf("files of owner %q, which has no state dir", owner)
		}
		seen := make(map[string]bool, len(refs))
		for _, f := range refs {
			if err := checkpoint.ValidatePath(f.Path); err != nil {
				return fmt.Errorf("file of owner %q: %w", owner, err)
			}
			if seen[f.Path] {
				return fmt.Errorf("file %q of owner %q is listed twice", f.Path, owner)
			}
			seen[f.Path] = true
			if err := blobstore.ValidateKey(f.Key); err != nil {
				return fmt.Errorf("file %q of owner %q: %w", f.Path, owner, err)
			}
			if f.Size < 0 || len(f.SHA256) != 64 || strings.Trim(f.SHA256, "0123456789abcdef") != "" {
				return fmt.Errorf("file %q of owner %q: bad size %d or sha256 %q", f.Path, owner, f.Size, f.SHA256)
			}
		}
	}
	return nil
}

// decodeRecord decodes a record with the same checks as checkpoint.FileStorage
// (valid id and status) plus checks on the file references, which a
// restore turns into local paths.
func decodeRecord(b []byte) (*Record, error) {
	if err := checkRecordBounds(b); err != nil {
		return nil, fmt.Errorf("decode record: %w", err)
	}
	d, err := checkpoint.DecodeRecord(b)
	if err != nil {
		return nil, err
	}
	var extra struct {
		Epoch       uint64                 `json:"epoch"`
		Files       map[string][]FileRef   `json:"files"`
		Workers     map[string]string      `json:"workers"`
		Remote      map[string][]RemoteRef `json:"remote"`
		CompletedAt time.Time              `json:"completed_at"`
		KeyID       string                 `json:"encryption_key_id"`
	}
	if err := json.Unmarshal(b, &extra); err != nil {
		return nil, fmt.Errorf("decode record: %w", err)
	}
	if err := validateFiles(d, extra.Files); err != nil {
		return nil, fmt.Errorf("decode record: %w", err)
	}
	if err := validateRemote(d, extra.Remote); err != nil {
		return nil, fmt.Errorf("decode record: %w", err)
	}
	if extra.KeyID != "" {
		if err := encrypted.ValidateKeyID(extra.KeyID); err != nil {
			return nil, fmt.Errorf("decode record: encryption_key_id: %w", err)
		}
	}
	return &Record{CheckpointData: d, Epoch: extra.Epoch, Files: extra.Files, Workers: extra.Workers, Remote: extra.Remote, CompletedAt: extra.CompletedAt, EncryptionKeyID: extra.KeyID}, nil
}

// Load reads the most recent checkpoint of any status, or nil with no
// error when there is none.
func (s *Storage) Load(ctx context.Context) (*checkpoint.CheckpointData, error) {
	return s.loadPointer(ctx, keyLatest)
}

// LoadLatestCompleted reads the most recent completed checkpoint, or nil
// with no error when there is none.
func (s *Storage) LoadLatestCompleted(ctx context.Context) (*checkpoint.CheckpointData, error) {
	return s.loadPointer(ctx, keyLatestCompleted)
}

// The pointers, by the names PointerID and PointerRecord take (the keys
// _latest and _latest-completed).
const (
	PointerLatest          = "latest"
	PointerLatestCompleted = "latest-completed"
)

func pointerKey(name string) (string, error) {
	switch name {
	case PointerLatest:
		return keyLatest, nil
	case PointerLatestCompleted:
		return keyLatestCompleted, nil
	}
	return "", fmt.Errorf("blobstorage: no pointer %q (want %s or %s)", name, PointerLatest, PointerLatestCompleted)
}

// PointerID returns the id of the checkpoint the pointer name
// (PointerLatest or PointerLatestCompleted) names, "" when there is none,
// without reading its record. A pointer that does not decode or names an
// invalid id wraps ErrCorrupt.
func (s *Storage) PointerID(ctx context.Context, name string) (string, error) {
	key, err := pointerKey(name)
	if err != nil {
		return "", err
	}
	p, _, _, err := s.readPointer(ctx, key, false)
	if err != nil {
		return "", fmt.Errorf("blobstorage: %w", err)
	}
	return p.ID, nil
}

// PointerRecord reads the record of the checkpoint the pointer name
// (PointerLatest or PointerLatestCompleted) names, nil with no error when
// there is none. A pointer that does not decode, names an invalid id, or
// names a checkpoint whose record does not exist (dangling) wraps
// ErrCorrupt; a dangling one wraps checkpoint.ErrNotFound too.
func (s *Storage) PointerRecord(ctx context.Context, name string) (*Record, error) {
	key, err := pointerKey(name)
	if err != nil {
		return nil, err
	}
	return s.pointerRecord(ctx, key)
}

func (s *Storage) loadPointer(ctx context.Context, key string) (*checkpoint.CheckpointData, error) {
	rec, err := s.pointerRecord(ctx, key)
	if rec == nil || err != nil {
		return nil, err
	}
	return rec.CheckpointData, nil
}

// pointerReads bounds how often pointerRecord follows a pointer that moved
// while its record was read.
const pointerReads = 3

func (s *Storage) pointerRecord(ctx context.Context, key string) (*Record, error) {
	rec, err := s.followPointer(ctx, key)
	if err == nil && key == keyLatest {
		h := &jobOfStore{gen: s.gen.Load()}
		if rec != nil {
			h.latest, h.job = rec.ID, rec.JobID
		}
		s.jobHint.Store(h)
	}
	return rec, err
}

func (s *Storage) followPointer(ctx context.Context, key string) (*Record, error) {
	var prev string
	for i := 0; ; i++ {
		p, _, ok, err := s.readPointer(ctx, key, false)
		if err != nil {
			return nil, fmt.Errorf("blobstorage: load: %w", err)
		}
		if !ok || p.ID == "" {
			return nil, nil
		}
		rec, err := s.readRecord(ctx, p.ID)
		if err == nil {
			return rec, nil
		}
		if !errors.Is(err, checkpoint.ErrNotFound) {
			return nil, fmt.Errorf("blobstorage: load %s (%s): %w", p.ID, key, err)
		}
		// A pointer names only records that were durable before it
		// moved, and GC retains them: a missing one is damage, not
		// "none" - unless the pointer moved on meanwhile (a live writer
		// saved, and its GC dropped the record read), then follow it.
		if p.ID == prev || i+1 == pointerReads {
			return nil, fmt.Errorf("blobstorage: load %s (%s): %w: the pointer names a checkpoint whose record does not exist: %w", p.ID, key, ErrCorrupt, err)
		}
		prev = p.ID
	}
}

// LoadSpecific reads checkpoint id; a missing record wraps checkpoint.ErrNotFound.
func (s *Storage) LoadSpecific(ctx context.Context, id string) (*checkpoint.CheckpointData, error) {
	rec, err := s.LoadRecord(ctx, id)
	if err != nil {
		return nil, err
	}
	return rec.CheckpointData, nil
}

// LoadRecord reads the full record of checkpoint id, with its file
// references. A missing record wraps checkpoint.ErrNotFound.
func (s *Storage) LoadRecord(ctx context.Context, id string) (*Record, error) {
	if err := checkpoint.ValidateID(id); err != nil {
		return nil, fmt.Errorf("blobstorage: load: %w", err)
	}
	rec, err := s.readRecord(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("blobstorage: load %s: %w", id, err)
	}
	return rec, nil
}

// Files returns the state files of checkpoint id by owner. A missing
// record wraps checkpoint.ErrNotFound.
func (s *Storage) Files(ctx context.Context, id string) (map[string][]FileRef, error) {
	rec, err := s.LoadRecord(ctx, id)
	if err != nil {
		return nil, err
	}
	return rec.Files, nil
}

// UpdateStatus rewrites the status of checkpoint id by compare-and-swap on
// its record, then moves the pointers forward as Save does. It needs the
// writer role. A missing record wraps checkpoint.ErrNotFound.
func (s *Storage) UpdateStatus(ctx context.Context, id string, status checkpoint.Status) (err error) {
	if err := checkpoint.ValidateStatusUpdate(id, status); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// The two-phase protocol completes a checkpoint here: the Observer
	// hears of it as a save of the record (no files).
	start, requests := time.Now(), s.requests.n.Load()
	defer func() {
		s.opts.Observer.Saved(SaveStats{ID: id, Completed: status != checkpoint.StatusPrepared, Duration: time.Since(start),
			Requests: int(s.requests.n.Load() - requests), Err: err})
	}()
	if err := s.checkWriterLocked(ctx); err != nil {
		return fmt.Errorf("blobstorage: update status %q: %w", id, err)
	}
	for {
		rec, etag, err := s.readRecordETag(ctx, id)
		if err != nil {
			return fmt.Errorf("blobstorage: update status: %w", err)
		}
		if rec.Epoch > s.epoch {
			// A newer writer saved this id (we never moved _latest to
			// it) after our _writer check: its record is not ours to
			// rewrite, and completing it would claim a commit of its
			// transaction that nobody made.
			s.markFencedLocked()
			return fmt.Errorf("blobstorage: update status %q: record written by epoch %d > ours %d: %w", id, rec.Epoch, s.epoch, checkpoint.ErrFenced)
		}
		rec.Status = status
		if rec.Completed() && rec.CompletedAt.IsZero() {
			rec.CompletedAt = time.Now().UTC()
		}
		newETag, err := s.bs.PutIfMatch(ctx, recordKey(id), etag, bytes.NewReader(encodeJSON(rec)))
		if errors.Is(err, blobstore.ErrPreconditionFailed) {
			// Someone rewrote the record between our read and write:
			// only another writer can, so check the fence and retry.
			if err := s.checkWriterLocked(ctx); err != nil {
				return fmt.Errorf("blobstorage: update status %q: %w", id, err)
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("blobstorage: update status %q: %w", id, err)
		}
		s.recordETag[id] = newETag
		if err := s.advancePointersLocked(ctx, id, rec.Completed()); err != nil {
			return fmt.Errorf("blobstorage: update status %q: %w", id, err)
		}
		return nil
	}
}

// IDs lists, ascending, the ids of the checkpoints that have a record in
// the store (of any status, referenced by a pointer or not).
func (s *Storage) IDs(ctx context.Context) ([]string, error) {
	var ids []string
	for o, err := range s.bs.List(ctx, dirCheckpoints) {
		if err != nil {
			return nil, fmt.Errorf("blobstorage: list checkpoints: %w", err)
		}
		if id, isRecord, ok := checkpointOfKey(o.Key); ok && isRecord {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// Introduced reports whether file f of owner was first uploaded by this
// checkpoint, rather than referenced from an older one whose upload it
// shares.
func (r *Record) Introduced(owner string, f FileRef) bool { return introducedBy(f.Key, owner, r.ID) }
