package checkpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tidemark-io/tidemark/blobstore"
)

// Keys of a BlobStorage, relative to the Blobstore it was given (which a
// caller prefixes with blobstore.WithPrefix when jobs share a bucket).
const (
	blobCheckpointsDir = "checkpoints/"
	blobSharedDir      = "shared/"
	blobPinsDir        = "pins/"
	blobRecordName     = "checkpoint.json"
	blobLatest         = "_latest"
	blobLatestDone     = "_latest-completed"
	blobWriter         = "_writer"
)

// Defaults of BlobOptions.
const (
	DefaultBlobConcurrency = 8
	DefaultBlobKeep        = 3
	DefaultBlobGrace       = time.Hour
	DefaultBlobPinTTL      = time.Hour
)

var (
	// ErrFenced is returned (wrapped) by every write of a BlobStorage whose
	// writer epoch is stale: another BlobStorage called Acquire after it.
	// A fenced BlobStorage stays fenced until it calls Acquire again.
	ErrFenced = errors.New("checkpoint: fenced: another writer took over")
	// ErrNotWriter is returned (wrapped) by Save, UpdateStatus and GC
	// (other than a dry run) of a BlobStorage on which Acquire was never
	// called.
	ErrNotWriter = errors.New("checkpoint: not the writer: call Acquire first")
)

// BlobOptions configure a BlobStorage. The zero value is usable: every
// zero field takes the default documented on it.
type BlobOptions struct {
	// Concurrency bounds parallel uploads (Save) and downloads (Restore).
	// Default: DefaultBlobConcurrency (8).
	Concurrency int
	// Keep is the number of completed checkpoints GC retains.
	// Default: DefaultBlobKeep (3).
	Keep int
	// Grace is how old a leftover (a record newer than the latest
	// completed one, files without a record, an unreferenced shared file,
	// an incomplete multipart upload) must be before GC deletes it; it
	// must exceed the longest Save. Default: DefaultBlobGrace (1h).
	Grace time.Duration
	// PinTTL is how long a restore pin protects its checkpoint from GC; it
	// must exceed the longest Restore. Default: DefaultBlobPinTTL (1h).
	PinTTL time.Duration
	// WriterName identifies this process in the _writer object
	// (diagnostics only). Default: "<hostname>-<pid>".
	WriterName string
	// Logger receives debug logs of GC deletions. Default: discard.
	Logger *slog.Logger
	// Classify reports whether a state file, named by its slash-separated
	// path relative to its owner's state directory, is immutable once
	// written and can therefore be shared by later checkpoints. Default:
	// names ending in ".sst" or ".blob" (Pebble tables and blob files).
	Classify func(relPath string) bool
}

func (o BlobOptions) withDefaults() BlobOptions {
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultBlobConcurrency
	}
	if o.Keep <= 0 {
		o.Keep = DefaultBlobKeep
	}
	if o.Grace <= 0 {
		o.Grace = DefaultBlobGrace
	}
	if o.PinTTL <= 0 {
		o.PinTTL = DefaultBlobPinTTL
	}
	if o.WriterName == "" {
		host, _ := os.Hostname()
		o.WriterName = host + "-" + strconv.Itoa(os.Getpid())
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Classify == nil {
		o.Classify = defaultClassify
	}
	return o
}

func defaultClassify(rel string) bool {
	return strings.HasSuffix(rel, ".sst") || strings.HasSuffix(rel, ".blob")
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

// BlobRecord is a checkpoint record as a BlobStorage stores it: the
// CheckpointData fields, the epoch of the writer that saved it, and where
// every state file lives.
type BlobRecord struct {
	*CheckpointData
	// Epoch is the writer epoch of the Save that wrote the files.
	Epoch uint64 `json:"epoch"`
	// Files maps each owner of CheckpointData.StateDirs to its files.
	Files map[string][]FileRef `json:"files"`
}

// blobPointer is the content of _latest and _latest-completed. An empty
// ID means "no checkpoint yet" (written by Acquire to fence the pointer).
type blobPointer struct {
	ID    string `json:"id"`
	Epoch uint64 `json:"epoch"`
}

// blobWriterRecord is the content of _writer.
type blobWriterRecord struct {
	Epoch  uint64    `json:"epoch"`
	Writer string    `json:"writer"`
	Since  time.Time `json:"since"`
}

// BlobStorage implements Storage on a blobstore.Blobstore, so that
// checkpoints outlive the node that took them. Layout under the store:
//
//	checkpoints/<id>/checkpoint.json                  the record (BlobRecord as JSON)
//	checkpoints/<id>/private/e<epoch>/<owner>/<path>  mutable files (MANIFEST, OPTIONS, WAL…)
//	shared/<owner>/<id>-e<epoch>/<path>               immutable files (SSTs), uploaded once
//	_latest, _latest-completed                         pointers {"id", "epoch"}, moved by CAS
//	_writer                                            writer epoch {"epoch", "writer", "since"}
//	pins/<id>/<nonce>                                  restore pins
//
// The local directory holds StateDir(id) = <localDir>/<id>.state, the
// working copy of native state, exactly as in FileStorage: Save uploads
// it, Restore downloads it on a node that does not have it.
//
// # Writer and fencing
//
// Only one BlobStorage (across every process) writes at a time: Acquire
// takes the next epoch in _writer by compare-and-swap and then rewrites
// both pointers with it. Every pointer move is a compare-and-swap that
// refuses a pointer carrying a greater epoch, and every write starts by
// checking that _writer still holds the ETag this BlobStorage wrote, so a
// writer that was cut off and replaced (a zombie) gets ErrFenced instead
// of moving pointers or deleting files. Loads need no writer role.
//
// # Incremental saves
//
// Files the Classify option calls immutable are uploaded once under a key
// unique to the checkpoint and epoch that first uploaded them; later
// checkpoints reference that key. A BlobStorage remembers, per file
// identity (device, inode, size, modification time), which key holds a
// file, so the hard-linked, unchanged tables of a Pebble checkpoint are
// not uploaded again.
type BlobStorage struct {
	bs       blobstore.Blobstore
	localDir string
	opts     BlobOptions

	// mu serialises the writes (Acquire, Save, UpdateStatus, GC): GC must
	// never delete a shared file that a concurrent Save decided to reuse.
	mu         sync.Mutex
	epoch      uint64            // 0: Acquire not called
	writerETag string            // ETag of the _writer we wrote
	fenced     bool              // saw ErrFenced; sticky until Acquire
	recordETag map[string]string // id → ETag of the record this writer last wrote

	cache blobFileCache
}

var _ Storage = (*BlobStorage)(nil)

// NewBlobStorage returns a BlobStorage keeping checkpoints in bs and
// local state directories under localDir. bs is used as is: prefix it
// with blobstore.WithPrefix when several jobs share a bucket. It does no
// I/O; call Acquire before the first Save.
func NewBlobStorage(bs blobstore.Blobstore, localDir string, opts BlobOptions) *BlobStorage {
	return &BlobStorage{
		bs:         bs,
		localDir:   localDir,
		opts:       opts.withDefaults(),
		recordETag: map[string]string{},
		cache:      blobFileCache{m: map[blobFileIdent]blobCachedFile{}},
	}
}

// Blobstore returns the store the checkpoints live in.
func (s *BlobStorage) Blobstore() blobstore.Blobstore { return s.bs }

// LocalDir returns the directory holding the local state directories.
func (s *BlobStorage) LocalDir() string { return s.localDir }

// StateDir returns localDir/<id>.state, the local root of checkpoint id's
// native state directories, or "" for an id ValidateID rejects.
func (s *BlobStorage) StateDir(id string) string {
	if ValidateID(id) != nil {
		return ""
	}
	return filepath.Join(s.localDir, id+stateExt)
}

// Epoch returns the writer epoch taken by the last Acquire, or 0.
func (s *BlobStorage) Epoch() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.epoch
}

func blobRecordKey(id string) string { return blobCheckpointsDir + id + "/" + blobRecordName }

func blobPrivateKey(id string, epoch uint64, owner, rel string) string {
	return path.Join(blobCheckpointsDir+id, "private", "e"+strconv.FormatUint(epoch, 10), owner, rel)
}

func blobSharedKey(id string, epoch uint64, owner, rel string) string {
	return path.Join(blobSharedDir+owner, id+"-e"+strconv.FormatUint(epoch, 10), rel)
}

// getJSON reads key into v. With withETag it also returns the ETag the
// content had: Stat comes before Get, so that if the object changes in
// between, the content read is newer than the ETag and a compare-and-swap
// based on both fails instead of acting on stale content. Without it,
// one Get and no Stat: a read that moves nothing needs no ETag.
func (s *BlobStorage) getJSON(ctx context.Context, key string, v any, withETag bool) (string, error) {
	var etag string
	if withETag {
		info, err := s.bs.Stat(ctx, key)
		if err != nil {
			return "", err
		}
		etag = info.ETag
	}
	b, err := s.getBytes(ctx, key)
	if err != nil {
		return "", err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return "", fmt.Errorf("decode %q: %w", key, err)
	}
	return etag, nil
}

func (s *BlobStorage) getBytes(ctx context.Context, key string) ([]byte, error) {
	rc, err := s.bs.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func blobJSON(v any) []byte {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		panic(err) // only plain structs are encoded here
	}
	return append(b, '\n')
}

// readPointer returns the pointer named name, and its ETag with
// withETag (for a compare-and-swap); ok is false when the pointer object
// does not exist.
func (s *BlobStorage) readPointer(ctx context.Context, name string, withETag bool) (p blobPointer, etag string, ok bool, err error) {
	etag, err = s.getJSON(ctx, name, &p, withETag)
	if errors.Is(err, blobstore.ErrNotFound) {
		return blobPointer{}, "", false, nil
	}
	if err != nil {
		return blobPointer{}, "", false, fmt.Errorf("read pointer %s: %w", name, err)
	}
	if p.ID != "" {
		if err := ValidateID(p.ID); err != nil {
			return blobPointer{}, "", false, fmt.Errorf("read pointer %s: %w", name, err)
		}
	}
	return p, etag, true, nil
}

// readRecord reads the record of id (one Get). A missing record wraps
// ErrNotFound.
func (s *BlobStorage) readRecord(ctx context.Context, id string) (*BlobRecord, error) {
	rec, _, err := s.readRecordWith(ctx, id, false)
	return rec, err
}

// readRecordETag reads the record of id and the ETag it had, for a
// compare-and-swap on it (see getJSON for the order of Stat and Get).
func (s *BlobStorage) readRecordETag(ctx context.Context, id string) (*BlobRecord, string, error) {
	return s.readRecordWith(ctx, id, true)
}

func (s *BlobStorage) readRecordWith(ctx context.Context, id string, withETag bool) (*BlobRecord, string, error) {
	key := blobRecordKey(id)
	var etag string
	if withETag {
		info, err := s.bs.Stat(ctx, key)
		if errors.Is(err, blobstore.ErrNotFound) {
			return nil, "", fmt.Errorf("%q: %w", id, ErrNotFound)
		}
		if err != nil {
			return nil, "", fmt.Errorf("%q: %w", id, err)
		}
		etag = info.ETag
	}
	b, err := s.getBytes(ctx, key)
	if errors.Is(err, blobstore.ErrNotFound) {
		return nil, "", fmt.Errorf("%q: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, "", fmt.Errorf("%q: %w", id, err)
	}
	rec, err := decodeBlobRecord(b)
	if err != nil {
		return nil, "", fmt.Errorf("%q: %w", id, err)
	}
	if rec.ID != id {
		return nil, "", fmt.Errorf("%q: record names id %q", id, rec.ID)
	}
	return rec, etag, nil
}

// decodeBlobRecord decodes a record with the same checks as FileStorage
// (valid id and status) plus checks on the file references, which a
// restore turns into local paths.
func decodeBlobRecord(b []byte) (*BlobRecord, error) {
	d, err := unmarshalRecord(b)
	if err != nil {
		return nil, err
	}
	var extra struct {
		Epoch uint64               `json:"epoch"`
		Files map[string][]FileRef `json:"files"`
	}
	if err := json.Unmarshal(b, &extra); err != nil {
		return nil, fmt.Errorf("checkpoint: decode record %q: %w", d.ID, err)
	}
	for owner, files := range extra.Files {
		if _, ok := d.StateDirs[owner]; !ok {
			return nil, fmt.Errorf("checkpoint: decode record %q: files of owner %q, which has no state dir", d.ID, owner)
		}
		for _, f := range files {
			if !filepath.IsLocal(filepath.FromSlash(f.Path)) || strings.Contains(f.Path, `\`) || f.Size < 0 {
				return nil, fmt.Errorf("checkpoint: decode record %q: bad file %q of owner %q", d.ID, f.Path, owner)
			}
		}
	}
	for owner, rel := range d.StateDirs {
		if err := validateBlobStateDir(owner, rel); err != nil {
			return nil, fmt.Errorf("checkpoint: decode record %q: %w", d.ID, err)
		}
	}
	return &BlobRecord{CheckpointData: d, Epoch: extra.Epoch, Files: extra.Files}, nil
}

// validateBlobStateDir checks an owner (a single key segment, since it names
// blob keys) and its state directory (a local relative path).
func validateBlobStateDir(owner, rel string) error {
	if strings.ContainsAny(owner, `/\`) || blobstore.ValidateKey(owner) != nil {
		return fmt.Errorf("owner %q is not a single key segment", owner)
	}
	if !filepath.IsLocal(filepath.FromSlash(rel)) {
		return fmt.Errorf("state dir %q of owner %q is not a local relative path", rel, owner)
	}
	return nil
}

// Load reads the most recent checkpoint of any status, or nil with no
// error when there is none.
func (s *BlobStorage) Load(ctx context.Context) (*CheckpointData, error) {
	return s.loadPointer(ctx, blobLatest)
}

// LoadLatestCompleted reads the most recent completed checkpoint, or nil
// with no error when there is none.
func (s *BlobStorage) LoadLatestCompleted(ctx context.Context) (*CheckpointData, error) {
	return s.loadPointer(ctx, blobLatestDone)
}

func (s *BlobStorage) loadPointer(ctx context.Context, name string) (*CheckpointData, error) {
	p, _, ok, err := s.readPointer(ctx, name, false)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: load: %w", err)
	}
	if !ok || p.ID == "" {
		return nil, nil
	}
	rec, err := s.readRecord(ctx, p.ID)
	if err != nil {
		// A pointer names only records that were durable before it
		// moved, and GC retains them: a missing one is damage, not "none".
		return nil, fmt.Errorf("checkpoint: load %s: %w", name, err)
	}
	return rec.CheckpointData, nil
}

// LoadSpecific reads checkpoint id; a missing record wraps ErrNotFound.
func (s *BlobStorage) LoadSpecific(ctx context.Context, id string) (*CheckpointData, error) {
	rec, err := s.LoadRecord(ctx, id)
	if err != nil {
		return nil, err
	}
	return rec.CheckpointData, nil
}

// LoadRecord reads the full record of checkpoint id, with its file
// references. A missing record wraps ErrNotFound.
func (s *BlobStorage) LoadRecord(ctx context.Context, id string) (*BlobRecord, error) {
	if err := ValidateID(id); err != nil {
		return nil, fmt.Errorf("checkpoint: load %q: %w", id, err)
	}
	rec, err := s.readRecord(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: load: %w", err)
	}
	return rec, nil
}

// Files returns the state files of checkpoint id by owner. A missing
// record wraps ErrNotFound.
func (s *BlobStorage) Files(ctx context.Context, id string) (map[string][]FileRef, error) {
	rec, err := s.LoadRecord(ctx, id)
	if err != nil {
		return nil, err
	}
	return rec.Files, nil
}

// UpdateStatus rewrites the status of checkpoint id by compare-and-swap on
// its record, then moves the pointers forward as Save does. It needs the
// writer role. A missing record wraps ErrNotFound.
func (s *BlobStorage) UpdateStatus(ctx context.Context, id string, status Status) error {
	if err := checkStatusUpdate(id, status); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkWriterLocked(ctx); err != nil {
		return fmt.Errorf("checkpoint: update status %q: %w", id, err)
	}
	for {
		rec, etag, err := s.readRecordETag(ctx, id)
		if err != nil {
			return fmt.Errorf("checkpoint: update status: %w", err)
		}
		if rec.Epoch > s.epoch {
			// A newer writer saved this id (we never moved _latest to
			// it) after our _writer check: its record is not ours to
			// rewrite, and completing it would claim a commit of its
			// transaction that nobody made.
			s.fenced = true
			return fmt.Errorf("checkpoint: update status %q: record written by epoch %d > ours %d: %w", id, rec.Epoch, s.epoch, ErrFenced)
		}
		rec.Status = status
		newETag, err := s.bs.PutIfMatch(ctx, blobRecordKey(id), etag, bytes.NewReader(blobJSON(rec)))
		if errors.Is(err, blobstore.ErrPreconditionFailed) {
			// Someone rewrote the record between our read and write:
			// only another writer can, so check the fence and retry.
			if err := s.checkWriterLocked(ctx); err != nil {
				return fmt.Errorf("checkpoint: update status %q: %w", id, err)
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("checkpoint: update status %q: %w", id, err)
		}
		s.recordETag[id] = newETag
		if err := s.advancePointersLocked(ctx, id, rec.Completed()); err != nil {
			return fmt.Errorf("checkpoint: update status %q: %w", id, err)
		}
		return nil
	}
}
