package blobstorage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/internal/simbug"
)

// Acquire makes this Storage the writer of the store and returns its
// epoch. It takes the next epoch in _writer by compare-and-swap (the last
// of several racing callers wins; the others are fenced), then rewrites
// both pointers with the new epoch. From then on, a previous writer that
// tries to move a pointer finds either a changed ETag or, re-reading, an
// epoch greater than its own, and gets checkpoint.ErrFenced; its other writes fail
// the _writer check first.
//
// Before its first write, Acquire checks that the store enforces
// conditional writes (blobstore.CheckConditionalWrites, through any
// decorator) and refuses, writing nothing, when it does not or cannot
// tell: fencing would be unsafe.
//
// It then refuses a store that holds data not Tidemark's and no identity
// mark (ErrForeignStore), and marks a new one (see the package
// documentation).
//
// Acquire is needed before Save and UpdateStatus, not for loads, Restore
// or GC. Calling it again takes a new epoch (and clears a fence).
func (s *Storage) Acquire(ctx context.Context) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.probed {
		// Fencing is only as good as the store's conditional writes:
		// check them before the first write, once per Storage.
		if _, err := blobstore.CheckConditionalWrites(ctx, s.bs); err != nil {
			return 0, fmt.Errorf("blobstorage: acquire: %w", err)
		}
		s.probed = true
	}
	if err := s.ensureMarked(ctx); err != nil {
		return 0, fmt.Errorf("blobstorage: acquire: %w", err)
	}
	epoch, etag, err := s.takeEpoch(ctx, "", 0)
	if err != nil {
		return 0, fmt.Errorf("blobstorage: acquire: %w", err)
	}
	if err := s.claimLocked(ctx, epoch, etag); err != nil {
		return 0, fmt.Errorf("blobstorage: acquire: %w", err)
	}
	return epoch, nil
}

// claimLocked makes epoch (written to _writer with etag) this writer's,
// then claims the pointers with it.
func (s *Storage) claimLocked(ctx context.Context, epoch uint64, etag string) error {
	s.epoch, s.writerETag, s.fenced = epoch, etag, false
	s.job = nil
	s.gen.Add(1)
	clear(s.recordETag)
	// Claim the pointers only after _writer is ours: a writer that took
	// an epoch after us will claim them with a greater one, and we must
	// then fail, not overwrite its claim.
	for _, name := range []string{keyLatest, keyLatestCompleted} {
		if err := s.claimPointer(ctx, name); err != nil {
			if errors.Is(err, checkpoint.ErrFenced) {
				s.markFencedLocked()
			}
			return err
		}
	}
	s.opts.Logger.Debug("checkpoint: writer acquired", "epoch", epoch, "writer", s.opts.WriterName)
	return nil
}

// raiseEpochLocked takes an epoch of at least min for the writer that
// holds the role now, by compare-and-swap on the _writer it wrote: if
// another writer took the role meanwhile, it is fenced instead, and
// fences nobody. A replicator raises its epoch above the epochs of the
// records it copies (see Replicator).
func (s *Storage) raiseEpochLocked(ctx context.Context, min uint64) error {
	if err := s.checkWriterLocked(ctx); err != nil {
		return err
	}
	epoch, etag, err := s.takeEpoch(ctx, s.writerETag, min)
	if errors.Is(err, blobstore.ErrPreconditionFailed) {
		s.markFencedLocked()
		return fmt.Errorf("epoch %d: %s changed: %w", s.epoch, keyWriter, checkpoint.ErrFenced)
	}
	if err != nil {
		return err
	}
	return s.claimLocked(ctx, epoch, etag)
}

// takeEpoch writes _writer with the stored epoch + 1 (1 if absent), or
// min if greater, by compare-and-swap, retrying until it wins. With
// match set, it writes only over the _writer of that ETag, once:
// ErrPreconditionFailed when it changed.
func (s *Storage) takeEpoch(ctx context.Context, match string, min uint64) (uint64, string, error) {
	for {
		var cur writerRecord
		etag, err := s.getJSON(ctx, keyWriter, &cur, true)
		absent := errors.Is(err, blobstore.ErrNotFound)
		if err != nil && !absent {
			return 0, "", fmt.Errorf("read %s: %w", keyWriter, err)
		}
		if match != "" && (absent || etag != match) {
			return 0, "", blobstore.ErrPreconditionFailed
		}
		next := writerRecord{Epoch: max(cur.Epoch+1, min), Writer: s.opts.WriterName, Since: time.Now().UTC()}
		body := bytes.NewReader(encodeJSON(next))
		var newETag string
		if absent {
			newETag, err = s.bs.PutIfAbsent(ctx, keyWriter, body)
		} else {
			newETag, err = s.bs.PutIfMatch(ctx, keyWriter, etag, body)
		}
		if errors.Is(err, blobstore.ErrPreconditionFailed) {
			if match != "" {
				return 0, "", err
			}
			continue // another writer moved it: take the one after theirs
		}
		if err != nil {
			return 0, "", fmt.Errorf("write %s: %w", keyWriter, err)
		}
		return next.Epoch, newETag, nil
	}
}

// claimPointer rewrites pointer name with its current id and our epoch,
// creating it (with an empty id) if absent, so that no earlier writer can
// move or create it any more.
func (s *Storage) claimPointer(ctx context.Context, name string) error {
	for {
		p, etag, ok, err := s.readPointer(ctx, name, true)
		if err != nil {
			return err
		}
		if ok && p.Epoch > s.epoch {
			return fmt.Errorf("pointer %s has epoch %d, ours is %d: %w", name, p.Epoch, s.epoch, checkpoint.ErrFenced)
		}
		if ok && p.Epoch == s.epoch {
			return nil
		}
		next := bytes.NewReader(encodeJSON(pointer{ID: p.ID, Epoch: s.epoch}))
		if ok {
			_, err = s.bs.PutIfMatch(ctx, name, etag, next)
		} else {
			_, err = s.bs.PutIfAbsent(ctx, name, next)
		}
		if errors.Is(err, blobstore.ErrPreconditionFailed) {
			continue
		}
		if err != nil {
			return fmt.Errorf("claim pointer %s: %w", name, err)
		}
		return nil
	}
}

// checkWriterLocked fails unless Acquire was called and _writer still
// holds the ETag we wrote: a cheap HEAD that stops a zombie before it
// uploads or deletes anything. It cannot close the window between the
// check and the write that follows; the pointer compare-and-swap closes
// it for pointers, and GC repeats the check before every delete.
func (s *Storage) checkWriterLocked(ctx context.Context) error {
	if s.epoch == 0 {
		return ErrNotWriter
	}
	if s.fenced {
		return fmt.Errorf("epoch %d: %w", s.epoch, checkpoint.ErrFenced)
	}
	if simbug.On(simbug.SkipWriterCheck) {
		return nil
	}
	info, err := s.bs.Stat(ctx, keyWriter)
	switch {
	case errors.Is(err, blobstore.ErrNotFound):
		s.markFencedLocked()
		return fmt.Errorf("epoch %d: %s is gone: %w", s.epoch, keyWriter, checkpoint.ErrFenced)
	case err != nil:
		return fmt.Errorf("check %s: %w", keyWriter, err)
	case info.ETag != s.writerETag:
		s.markFencedLocked()
		return fmt.Errorf("epoch %d: %s changed: %w", s.epoch, keyWriter, checkpoint.ErrFenced)
	}
	return nil
}

// advancePointersLocked moves _latest to id and, for a completed
// checkpoint, _latest-completed too. _latest moves first, so that
// _latest-completed never names a newer checkpoint than _latest.
func (s *Storage) advancePointersLocked(ctx context.Context, id string, completed bool) error {
	if err := s.advanceLocked(ctx, keyLatest, id); err != nil {
		return err
	}
	if completed {
		return s.advanceLocked(ctx, keyLatestCompleted, id)
	}
	return nil
}

// advanceLocked moves pointer name forward to id by compare-and-swap. It
// never moves a pointer backwards (an id not newer than the current one
// leaves it alone) and never overwrites a pointer carrying a greater
// epoch: that means another writer took over, and we are fenced.
func (s *Storage) advanceLocked(ctx context.Context, name, id string) error {
	for {
		p, etag, ok, err := s.readPointer(ctx, name, true)
		if err != nil {
			return err
		}
		if ok && p.Epoch > s.epoch && !simbug.On(simbug.SkipWriterCheck) {
			s.markFencedLocked()
			return fmt.Errorf("pointer %s has epoch %d, ours is %d: %w", name, p.Epoch, s.epoch, checkpoint.ErrFenced)
		}
		if ok && p.ID != "" && p.ID >= id {
			return nil
		}
		next := bytes.NewReader(encodeJSON(pointer{ID: id, Epoch: s.epoch}))
		if ok {
			_, err = s.bs.PutIfMatch(ctx, name, etag, next)
		} else {
			_, err = s.bs.PutIfAbsent(ctx, name, next)
		}
		if errors.Is(err, blobstore.ErrPreconditionFailed) {
			continue // moved under us: re-read, it may now carry a greater epoch
		}
		if err != nil {
			return fmt.Errorf("move pointer %s to %q: %w", name, id, err)
		}
		return nil
	}
}

// CheckWriter fails, wrapping ErrNotWriter or checkpoint.ErrFenced, unless
// this Storage holds the writer role now. checkpoint.ExtractCheckpoint
// calls it before writing anything, so that a restore into a Storage that
// could not save the record leaves nothing behind.
func (s *Storage) CheckWriter(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkWriterLocked(ctx); err != nil {
		return fmt.Errorf("blobstorage: %w", err)
	}
	return nil
}

// markFencedLocked records that another writer took over: every later
// write fails with checkpoint.ErrFenced until Acquire. The Observer hears
// of it once per epoch.
func (s *Storage) markFencedLocked() {
	if !s.fenced {
		s.opts.Observer.Fenced(s.epoch)
	}
	s.fenced = true
}
