package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/tidemark-io/tidemark/archive"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/savepoint"
)

// Blobstore is the object-store abstraction savepoints (and object-store
// checkpoints) are stored in. It is blobstore.Blobstore; the alias keeps
// the reference engine's name.
type Blobstore = blobstore.Blobstore

// ErrBlobNotFound is returned (wrapped) by Blobstore.Get for a missing key,
// and so by RestoreSavepoint and CopySavepoint for a missing savepoint. It
// is the same sentinel as blobstore.ErrNotFound.
var ErrBlobNotFound = blobstore.ErrNotFound

// SavepointPrefix is the blobstore key prefix under which savepoints live
// (savepoint.LabelPrefix; their content lives in savepoint.AreaPrefix).
const SavepointPrefix = savepoint.LabelPrefix

// Sentinel errors of savepoints.
var (
	// ErrInvalidLabel is returned (wrapped, together with
	// blobstore.ErrInvalidKey) for a savepoint label that is not a single
	// valid key segment.
	ErrInvalidLabel = errors.New("checkpoint: invalid savepoint label")
	// ErrNoCompleted is returned (wrapped) by CreateSavepoint when the
	// source has no completed checkpoint to promote.
	ErrNoCompleted = errors.New("no completed checkpoint")
)

// SavepointKey returns the blobstore key for a named savepoint:
// SavepointPrefix + label. It does not validate label; every function
// that uses a label calls ValidateLabel first.
func SavepointKey(label string) string { return savepoint.LabelKey(label) }

// ValidateLabel reports whether label can name a savepoint: exactly one
// key segment (no '/', not "." or "..", no control characters, valid
// UTF-8) such that SavepointKey(label) passes blobstore.ValidateKey. So
// "../../x" and "a/b" are errors. The error wraps ErrInvalidLabel and
// blobstore.ErrInvalidKey.
func ValidateLabel(label string) error {
	if strings.Contains(label, "/") {
		return fmt.Errorf("%w: %q: %w: contains '/'", ErrInvalidLabel, label, blobstore.ErrInvalidKey)
	}
	if err := blobstore.ValidateKey(label); err != nil {
		return fmt.Errorf("%w: %q: %w", ErrInvalidLabel, label, err)
	}
	if err := blobstore.ValidateKey(SavepointKey(label)); err != nil {
		return fmt.Errorf("%w: %q: %w", ErrInvalidLabel, label, err)
	}
	return nil
}

// CreateSavepoint stores the latest completed checkpoint in src as
// savepoint label of bs, replacing any savepoint of that label. It is
// CreateSavepointWith with savepoint.Options{Replace: true}. This is the
// promotion half of a stop-with-savepoint: the job has drained and
// written its final checkpoint, and here that checkpoint is copied into
// durable, named, never-GC'd storage the operator can restart from.
//
// Returns the checkpoint ID that was promoted. Errors wrapping
// ErrNoCompleted if src has no completed checkpoint.
func CreateSavepoint(ctx context.Context, src Storage, bs Blobstore, label string) (string, error) {
	id, _, err := CreateSavepointWith(ctx, src, bs, label, savepoint.Options{Replace: true})
	return id, err
}

// CreateSavepointWith stores the latest completed checkpoint in src as
// savepoint label of bs, and returns its id and what it stored and
// uploaded. Errors wrap ErrNoCompleted if src has no completed checkpoint.
//
// The savepoint is stored incrementally (package savepoint): each file's
// content once, by SHA-256, in bs's savepoint area, uploading only what
// the area lacks, each upload checked against its digest. Its manifest is
// published last, so no partial savepoint becomes visible.
//
// With opts.Replace a savepoint of label is replaced, and label must pass
// ValidateLabel. Without it the manifest is written with PutIfAbsent: a
// taken label (or a lost race for it) changes no savepoint and wraps
// ErrSavepointExists, and label must pass ValidateNewLabel.
func CreateSavepointWith(ctx context.Context, src Storage, bs Blobstore, label string, opts savepoint.Options) (string, savepoint.Stats, error) {
	validate := ValidateNewLabel
	if opts.Replace {
		validate = ValidateLabel
	}
	if err := validate(label); err != nil {
		return "", savepoint.Stats{}, fmt.Errorf("checkpoint: create savepoint: %w", err)
	}
	return createSavepoint(ctx, src, bs, label, opts)
}

// createSavepoint is CreateSavepointWith for a validated label.
func createSavepoint(ctx context.Context, src Storage, bs Blobstore, label string, opts savepoint.Options) (string, savepoint.Stats, error) {
	cp, err := src.LoadLatestCompleted(ctx)
	if err != nil {
		return "", savepoint.Stats{}, fmt.Errorf("checkpoint: create savepoint %q: %w", label, err)
	}
	if cp == nil {
		return "", savepoint.Stats{}, fmt.Errorf("checkpoint: create savepoint %q: %w", label, ErrNoCompleted)
	}
	// Remote objects are immutable under names never reused: the digests
	// the newest savepoint recorded spare reading them again to hash.
	var known func(string, int64) (string, bool)
	if _, ok := src.(ArchiveSource); ok {
		k := savepoint.KnownDigests(ctx, bs, archive.RemotePrefix, opts)
		known = func(key string, size int64) (string, bool) {
			f, ok := k[key]
			return f.SHA256, ok && f.Size == size
		}
	}
	m, open, err := archiveFiles(ctx, src, cp.ID, known)
	if err != nil {
		return "", savepoint.Stats{}, fmt.Errorf("checkpoint: create savepoint %q: %w", label, err)
	}
	st, err := savepoint.Put(ctx, bs, label, m, open, opts)
	if err != nil {
		return "", st, fmt.Errorf("checkpoint: create savepoint %q: %w", label, exists(err))
	}
	return cp.ID, st, nil
}

// ListSavepoints returns the labels of all savepoints in bs, in
// lexicographic order. Keys under SavepointPrefix that are not valid
// labels (nested keys) are skipped.
func ListSavepoints(ctx context.Context, bs Blobstore) ([]string, error) {
	var labels []string
	for info, err := range bs.List(ctx, SavepointPrefix) {
		if err != nil {
			return nil, fmt.Errorf("checkpoint: list savepoints: %w", err)
		}
		label := strings.TrimPrefix(info.Key, SavepointPrefix)
		if ValidateLabel(label) == nil {
			labels = append(labels, label)
		}
	}
	return labels, nil
}

// RestoreSavepoint extracts the named savepoint from bs into dst, making
// it dst's latest completed checkpoint so the engine resumes from it on
// the next run (see ExtractCheckpoint for the conditions on dst). Returns
// the restored checkpoint ID. A missing savepoint wraps ErrBlobNotFound.
// Savepoints of both formats restore (see package savepoint): each is
// read as one archive stream and verified completely by
// ExtractCheckpoint; the savepoint is pinned while it is read.
//
// Onto a blobstorage.Storage, call its Acquire first: saving the record
// needs the writer role, and taking it fences the job running there, if
// any. A rollback (a savepoint older than dst's latest checkpoint) makes
// the job resume from the savepoint's offsets, so a transactional sink
// emits again, in new transactions, the output committed after it.
//
// Savepoints are never garbage-collected, and CreateSavepointWith without
// Replace never replaces one: use a label per deploy, and delete old ones with
// DeleteSavepoint (`tidemark savepoint rm`).
func RestoreSavepoint(ctx context.Context, dst Storage, bs Blobstore, label string) (string, error) {
	return RestoreSavepointWith(ctx, dst, bs, label, RestoreOptions{})
}

// RestoreSavepointWith is RestoreSavepoint with options: a savepoint of
// another job than the checkpoints dst holds is refused before anything
// is written (a *JobMismatch wrapping ErrOtherJob) unless opts.NewJob
// (see ExtractCheckpointWith). Taking the writer role of a
// blobstorage.Storage writes to the store: to refuse with the store
// unchanged, call CheckJob on the savepoint's record (SavepointRecord)
// before Acquire.
func RestoreSavepointWith(ctx context.Context, dst Storage, bs Blobstore, label string, opts RestoreOptions) (string, error) {
	if err := ValidateLabel(label); err != nil {
		return "", fmt.Errorf("checkpoint: restore savepoint: %w", err)
	}
	sp, err := savepoint.Open(ctx, bs, label, savepoint.Options{})
	if err != nil {
		return "", fmt.Errorf("checkpoint: restore savepoint %q: %w", label, missingSavepoint(err))
	}
	defer sp.Close()
	rc := sp.Archive(ctx)
	defer rc.Close()
	id, err := ExtractCheckpointWith(ctx, dst, rc, opts)
	if err != nil {
		return "", fmt.Errorf("checkpoint: restore savepoint %q: %w", label, err)
	}
	return id, nil
}

// DeleteSavepoint removes the named savepoint from bs, and the content of
// its files that no other savepoint references once older than the grace
// period (savepoint.Delete: a later delete removes the rest). Deleting a
// missing savepoint succeeds. While a create, copy or restore holds the
// savepoint area for longer than savepoint.DefaultLockWait, it fails
// with savepoint.ErrLocked and changes nothing.
func DeleteSavepoint(ctx context.Context, bs Blobstore, label string) error {
	if err := ValidateLabel(label); err != nil {
		return fmt.Errorf("checkpoint: delete savepoint: %w", err)
	}
	_, err := savepoint.Delete(ctx, bs, label, savepoint.Options{})
	if err != nil && !errors.Is(err, ErrBlobNotFound) {
		return fmt.Errorf("checkpoint: delete savepoint %q: %w", label, err)
	}
	return nil
}

// CopySavepoint copies the named savepoint from src to dst, replacing any
// savepoint of that label in dst. It is CopySavepointWith with
// savepoint.Options{Replace: true}.
func CopySavepoint(ctx context.Context, src, dst Blobstore, label string) error {
	_, err := CopySavepointWith(ctx, src, dst, label, savepoint.Options{Replace: true})
	return err
}

// CopySavepointWith copies the named savepoint from src to dst (another
// bucket, region or filesystem) and returns what it copied and uploaded.
// It sends only the content dst lacks, checks every byte sent against its
// SHA-256, and publishes dst's manifest last (savepoint.Copy). Run again
// after an interruption, it resends nothing that arrived.
//
// A damaged savepoint wraps archive.ErrCorrupt and publishes nothing in
// dst; a missing one wraps ErrBlobNotFound. A savepoint in today's
// archive format is stored in dst by content, like any new one. Without
// opts.Replace a savepoint of label in dst is kept and the error wraps
// ErrSavepointExists.
func CopySavepointWith(ctx context.Context, src, dst Blobstore, label string, opts savepoint.Options) (savepoint.Stats, error) {
	if err := ValidateLabel(label); err != nil {
		return savepoint.Stats{}, fmt.Errorf("checkpoint: copy savepoint: %w", err)
	}
	st, err := savepoint.Copy(ctx, src, dst, label, opts)
	if err != nil {
		return st, fmt.Errorf("checkpoint: copy savepoint %q: %w", label, missingSavepoint(exists(err)))
	}
	return st, nil
}

// ExportSavepoint writes the named savepoint of bs to w as one portable
// archive (package archive, a plain POSIX tar that tar -x and sha256sum -c
// against its manifest accept), every file checked against its digest on
// the way. The archive must be discarded if it fails.
func ExportSavepoint(ctx context.Context, bs Blobstore, label string, w io.Writer) error {
	if err := ValidateLabel(label); err != nil {
		return fmt.Errorf("checkpoint: export savepoint: %w", err)
	}
	sp, err := savepoint.Open(ctx, bs, label, savepoint.Options{})
	if err != nil {
		return fmt.Errorf("checkpoint: export savepoint %q: %w", label, missingSavepoint(err))
	}
	defer sp.Close()
	if sp.Format == savepoint.FormatArchive {
		// Stored whole: check it as it passes, so a damaged one fails.
		rc := sp.Archive(ctx)
		defer rc.Close()
		_, err = archive.Verify(ctx, io.TeeReader(rc, w), archive.Limits{})
	} else {
		err = sp.WriteArchive(ctx, w)
	}
	if err != nil {
		return fmt.Errorf("checkpoint: export savepoint %q: %w", label, err)
	}
	return nil
}

// ImportSavepoint stores the archive read from r (ArchiveCheckpoint's
// format, as ExportSavepoint writes it) as savepoint label of bs,
// uploading only the content bs lacks (savepoint.Import). The archive is
// verified completely before the savepoint is published. It never
// replaces a savepoint: a taken label wraps ErrSavepointExists.
func ImportSavepoint(ctx context.Context, bs Blobstore, label string, r io.Reader) error {
	if err := ValidateNewLabel(label); err != nil {
		return fmt.Errorf("checkpoint: import savepoint: %w", err)
	}
	if _, err := savepoint.Import(ctx, bs, label, r, savepoint.Options{}); err != nil {
		return fmt.Errorf("checkpoint: import savepoint %q: %w", label, exists(err))
	}
	return nil
}

// missingSavepoint says "no such savepoint" for a store's not-found error
// (whose key and store details add nothing), and returns other errors as
// they are.
func missingSavepoint(err error) error {
	if errors.Is(err, ErrBlobNotFound) && !errors.Is(err, archive.ErrCorrupt) {
		return fmt.Errorf("no such savepoint in the store: %w", ErrBlobNotFound)
	}
	return err
}

// SavepointRecord returns the checkpoint record the named savepoint holds
// (its manifest's, in either format), reading no file and taking no lock
// (savepoint.ReadManifest): for CheckJob, and for a tool that says what a
// savepoint is before restoring it. A record that does not decode wraps
// archive.ErrCorrupt.
func SavepointRecord(ctx context.Context, bs Blobstore, label string) (*CheckpointData, error) {
	if err := ValidateLabel(label); err != nil {
		return nil, fmt.Errorf("checkpoint: savepoint record: %w", err)
	}
	m, _, err := savepoint.ReadManifest(ctx, bs, label, savepoint.Options{})
	if err != nil {
		return nil, fmt.Errorf("checkpoint: savepoint %q: %w", label, missingSavepoint(err))
	}
	cp, err := DecodeRecord(m.Record)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: savepoint %q: %w: %w", label, archive.ErrCorrupt, err)
	}
	return cp, nil
}
