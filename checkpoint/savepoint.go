package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/tidemark-io/tidemark/archive"
	"github.com/tidemark-io/tidemark/blobstore"
)

// Blobstore is the object-store abstraction savepoints (and object-store
// checkpoints) are stored in. It is blobstore.Blobstore; the alias keeps
// the reference engine's name.
type Blobstore = blobstore.Blobstore

// ErrBlobNotFound is returned (wrapped) by Blobstore.Get for a missing key,
// and so by RestoreSavepoint and CopySavepoint for a missing savepoint. It
// is the same sentinel as blobstore.ErrNotFound.
var ErrBlobNotFound = blobstore.ErrNotFound

// SavepointPrefix is the blobstore key prefix under which savepoints live.
const SavepointPrefix = "savepoints/"

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
func SavepointKey(label string) string { return SavepointPrefix + label }

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

// CreateSavepoint archives the latest completed checkpoint in src and
// stores it in bs under SavepointKey(label), replacing any savepoint of
// that label. This is the promotion half of a stop-with-savepoint: the job
// has drained and written its final checkpoint, and here that checkpoint
// is copied into durable, named, never-GC'd storage the operator can
// restart from.
//
// The archive is streamed into bs.Put through a pipe: no temporary copy,
// memory bounded by the store's Put. If writing the archive fails, the
// Put's reader returns that error, so no partial savepoint becomes
// visible.
//
// Returns the checkpoint ID that was promoted. Errors wrapping
// ErrNoCompleted if src has no completed checkpoint.
func CreateSavepoint(ctx context.Context, src Storage, bs Blobstore, label string) (string, error) {
	if err := ValidateLabel(label); err != nil {
		return "", fmt.Errorf("checkpoint: create savepoint: %w", err)
	}
	return createSavepoint(ctx, src, bs, label, putReplacing)
}

// createSavepoint is CreateSavepoint for a validated label, writing with
// put (putReplacing or putIfAbsent).
func createSavepoint(ctx context.Context, src Storage, bs Blobstore, label string, put putFunc) (string, error) {
	cp, err := src.LoadLatestCompleted(ctx)
	if err != nil {
		return "", fmt.Errorf("checkpoint: create savepoint %q: %w", label, err)
	}
	if cp == nil {
		return "", fmt.Errorf("checkpoint: create savepoint %q: %w", label, ErrNoCompleted)
	}
	pr, pw := io.Pipe()
	werr := make(chan error, 1)
	go func() {
		err := ArchiveCheckpoint(ctx, src, cp.ID, pw)
		// A failed archive reaches Put as a read error, so Put makes
		// nothing visible; a good one reaches it as EOF.
		pw.CloseWithError(err)
		werr <- err
	}()
	perr := put(ctx, bs, SavepointKey(label), pr)
	// If Put stopped reading early, unblock the archive writer.
	pr.CloseWithError(errors.New("checkpoint: savepoint upload ended"))
	aerr := <-werr
	if perr != nil {
		if aerr != nil && !errors.Is(perr, aerr) {
			perr = errors.Join(perr, aerr)
		}
		return "", fmt.Errorf("checkpoint: create savepoint %q: %w", label, perr)
	}
	if aerr != nil { // Put succeeded without the archive's error: cannot trust it
		_ = bs.Delete(ctx, SavepointKey(label))
		return "", fmt.Errorf("checkpoint: create savepoint %q: %w", label, aerr)
	}
	return cp.ID, nil
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
//
// Onto a blobstorage.Storage, call its Acquire first: saving the record
// needs the writer role, and taking it fences the job running there, if
// any. A rollback (a savepoint older than dst's latest checkpoint) makes
// the job resume from the savepoint's offsets, so a transactional sink
// emits again, in new transactions, the output committed after it.
//
// Savepoints are never garbage-collected, and CreateNewSavepoint never
// replaces one: use a label per deploy, and delete old ones with
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
	rc, err := resumingReads(bs).Get(ctx, SavepointKey(label))
	if err != nil {
		return "", fmt.Errorf("checkpoint: restore savepoint %q: %w", label, missingSavepoint(err))
	}
	defer rc.Close()
	id, err := ExtractCheckpointWith(ctx, dst, rc, opts)
	if err != nil {
		return "", fmt.Errorf("checkpoint: restore savepoint %q: %w", label, err)
	}
	return id, nil
}

// DeleteSavepoint removes the named savepoint from bs. Deleting a missing
// savepoint succeeds.
func DeleteSavepoint(ctx context.Context, bs Blobstore, label string) error {
	if err := ValidateLabel(label); err != nil {
		return fmt.Errorf("checkpoint: delete savepoint: %w", err)
	}
	if err := bs.Delete(ctx, SavepointKey(label)); err != nil {
		return fmt.Errorf("checkpoint: delete savepoint %q: %w", label, err)
	}
	return nil
}

// CopySavepoint streams the named savepoint from src to dst (another
// bucket, region or filesystem) and verifies it on the way: the bytes are
// teed into archive.Verify as they pass, and the reader given to dst.Put
// reports EOF only once the whole archive — manifest, every file's size
// and SHA-256, end of stream — has been verified. A damaged savepoint
// makes that reader return the verification error instead, so dst.Put
// fails and nothing becomes visible in dst. The result is an error
// wrapping archive.ErrCorrupt. A missing savepoint wraps ErrBlobNotFound.
func CopySavepoint(ctx context.Context, src, dst Blobstore, label string) error {
	if err := ValidateLabel(label); err != nil {
		return fmt.Errorf("checkpoint: copy savepoint: %w", err)
	}
	return copySavepoint(ctx, src, dst, label, putReplacing)
}

// copySavepoint is CopySavepoint for a validated label, writing with put.
func copySavepoint(ctx context.Context, src, dst Blobstore, label string, put putFunc) error {
	key := SavepointKey(label)
	rc, err := resumingReads(src).Get(ctx, key)
	if err != nil {
		return fmt.Errorf("checkpoint: copy savepoint %q: %w", label, missingSavepoint(err))
	}
	defer rc.Close()

	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		_, err := archive.Verify(ctx, pr, archive.Limits{})
		if err == nil {
			// Verify reads to the end; drain whatever a reader variant
			// left so the writer side never blocks.
			_, _ = io.Copy(io.Discard, pr)
		}
		pr.CloseWithError(err)
		done <- err
	}()
	vr := &verifyingReader{src: rc, pw: pw, done: done}
	perr := put(ctx, dst, key, vr)
	// If Put stopped reading early, stop the verifier too.
	pw.CloseWithError(errors.New("checkpoint: savepoint copy ended"))
	verr := vr.result()
	switch {
	case perr != nil:
		return fmt.Errorf("checkpoint: copy savepoint %q: %w", label, perr)
	case verr != nil:
		// Put returned without reading to EOF, so it never saw the
		// verdict; do not leave an unverified copy behind.
		_ = dst.Delete(ctx, key)
		return fmt.Errorf("checkpoint: copy savepoint %q: %w", label, verr)
	}
	return nil
}

// verifyingReader passes src through to its reader while feeding the same
// bytes to a verifier, and turns the source's EOF into the verifier's
// verdict.
type verifyingReader struct {
	src  io.Reader
	pw   *io.PipeWriter
	done <-chan error

	verdict    error
	haveResult bool
	err        error // sticky error returned by Read
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	n, err := v.src.Read(p)
	if n > 0 {
		if _, werr := v.pw.Write(p[:n]); werr != nil {
			// The verifier stopped: it refused the archive.
			if verr := v.result(); verr != nil {
				werr = verr
			}
			v.err = werr
			return 0, v.err
		}
	}
	switch {
	case err == io.EOF:
		v.pw.Close()
		if verr := v.result(); verr != nil {
			v.err = verr
			return 0, v.err
		}
		v.err = io.EOF
		return n, io.EOF
	case err != nil:
		v.pw.CloseWithError(err)
		v.err = err
		return n, err
	}
	return n, nil
}

// result waits for and returns the verifier's verdict.
func (v *verifyingReader) result() error {
	if !v.haveResult {
		v.verdict, v.haveResult = <-v.done, true
	}
	return v.verdict
}

// resumingReads returns bs with reads that resume after a connection lost
// mid-body: a savepoint is one large object, and the archive's digests
// catch a read that mixed two versions of it.
func resumingReads(bs Blobstore) Blobstore {
	return blobstore.WithResumingReads(bs, blobstore.DefaultReadResumptions)
}

// missingSavepoint says "no such savepoint" for a store's not-found error
// (whose key and store details add nothing), and returns other errors as
// they are.
func missingSavepoint(err error) error {
	if errors.Is(err, ErrBlobNotFound) {
		return fmt.Errorf("no such savepoint in the store: %w", ErrBlobNotFound)
	}
	return err
}

// SavepointRecord returns the checkpoint record the named savepoint holds
// (its manifest's), reading no further than the manifest: for CheckJob,
// and for a tool that says what a savepoint is before restoring it. A
// record that does not decode wraps archive.ErrCorrupt.
func SavepointRecord(ctx context.Context, bs Blobstore, label string) (*CheckpointData, error) {
	if err := ValidateLabel(label); err != nil {
		return nil, fmt.Errorf("checkpoint: savepoint record: %w", err)
	}
	rc, err := bs.Get(ctx, SavepointKey(label))
	if err != nil {
		return nil, fmt.Errorf("checkpoint: savepoint %q: %w", label, missingSavepoint(err))
	}
	defer rc.Close()
	ar, err := archive.NewReader(ctx, rc, archive.Limits{})
	if err != nil {
		return nil, fmt.Errorf("checkpoint: savepoint %q: %w", label, err)
	}
	defer ar.Close()
	cp, err := DecodeRecord(ar.Manifest().Record)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: savepoint %q: %w: %w", label, archive.ErrCorrupt, err)
	}
	return cp, nil
}
