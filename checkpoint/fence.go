package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tidemark-io/tidemark/blobstore"
)

// Acquire makes this BlobStorage the writer of the store and returns its
// epoch. It takes the next epoch in _writer by compare-and-swap (the last
// of several racing callers wins; the others are fenced), then rewrites
// both pointers with the new epoch. From then on, a previous writer that
// tries to move a pointer finds either a changed ETag or, re-reading, an
// epoch greater than its own, and gets ErrFenced; its other writes fail
// the _writer check first.
//
// Acquire is needed before Save, UpdateStatus and a GC that deletes, not
// for loads, Restore or a dry-run GC. Calling it again takes a new epoch (and clears a fence).
func (s *BlobStorage) Acquire(ctx context.Context) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	epoch, etag, err := s.takeEpoch(ctx)
	if err != nil {
		return 0, fmt.Errorf("checkpoint: acquire: %w", err)
	}
	s.epoch, s.writerETag, s.fenced = epoch, etag, false
	clear(s.recordETag)
	// Claim the pointers only after _writer is ours: a writer that took
	// an epoch after us will claim them with a greater one, and we must
	// then fail, not overwrite its claim.
	for _, name := range []string{blobLatest, blobLatestDone} {
		if err := s.claimPointer(ctx, name); err != nil {
			if errors.Is(err, ErrFenced) {
				s.fenced = true
			}
			return 0, fmt.Errorf("checkpoint: acquire: %w", err)
		}
	}
	s.opts.Logger.Debug("checkpoint: writer acquired", "epoch", epoch, "writer", s.opts.WriterName)
	return epoch, nil
}

// takeEpoch writes _writer with the stored epoch + 1 (1 if absent), by
// compare-and-swap, retrying until it wins.
func (s *BlobStorage) takeEpoch(ctx context.Context) (uint64, string, error) {
	for {
		var cur blobWriterRecord
		etag, err := s.getJSON(ctx, blobWriter, &cur, true)
		absent := errors.Is(err, blobstore.ErrNotFound)
		if err != nil && !absent {
			return 0, "", fmt.Errorf("read %s: %w", blobWriter, err)
		}
		next := blobWriterRecord{Epoch: cur.Epoch + 1, Writer: s.opts.WriterName, Since: time.Now().UTC()}
		body := bytes.NewReader(blobJSON(next))
		var newETag string
		if absent {
			newETag, err = s.bs.PutIfAbsent(ctx, blobWriter, body)
		} else {
			newETag, err = s.bs.PutIfMatch(ctx, blobWriter, etag, body)
		}
		if errors.Is(err, blobstore.ErrPreconditionFailed) {
			continue // another writer moved it: take the one after theirs
		}
		if err != nil {
			return 0, "", fmt.Errorf("write %s: %w", blobWriter, err)
		}
		return next.Epoch, newETag, nil
	}
}

// claimPointer rewrites pointer name with its current id and our epoch,
// creating it (with an empty id) if absent, so that no earlier writer can
// move or create it any more.
func (s *BlobStorage) claimPointer(ctx context.Context, name string) error {
	for {
		p, etag, ok, err := s.readPointer(ctx, name, true)
		if err != nil {
			return err
		}
		if ok && p.Epoch > s.epoch {
			return fmt.Errorf("pointer %s has epoch %d, ours is %d: %w", name, p.Epoch, s.epoch, ErrFenced)
		}
		if ok && p.Epoch == s.epoch {
			return nil
		}
		next := bytes.NewReader(blobJSON(blobPointer{ID: p.ID, Epoch: s.epoch}))
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
func (s *BlobStorage) checkWriterLocked(ctx context.Context) error {
	if s.epoch == 0 {
		return ErrNotWriter
	}
	if s.fenced {
		return fmt.Errorf("epoch %d: %w", s.epoch, ErrFenced)
	}
	info, err := s.bs.Stat(ctx, blobWriter)
	switch {
	case errors.Is(err, blobstore.ErrNotFound):
		s.fenced = true
		return fmt.Errorf("epoch %d: %s is gone: %w", s.epoch, blobWriter, ErrFenced)
	case err != nil:
		return fmt.Errorf("check %s: %w", blobWriter, err)
	case info.ETag != s.writerETag:
		s.fenced = true
		return fmt.Errorf("epoch %d: %s changed: %w", s.epoch, blobWriter, ErrFenced)
	}
	return nil
}

// advancePointersLocked moves _latest to id and, for a completed
// checkpoint, _latest-completed too. _latest moves first, so that
// _latest-completed never names a newer checkpoint than _latest.
func (s *BlobStorage) advancePointersLocked(ctx context.Context, id string, completed bool) error {
	if err := s.advanceLocked(ctx, blobLatest, id); err != nil {
		return err
	}
	if completed {
		return s.advanceLocked(ctx, blobLatestDone, id)
	}
	return nil
}

// advanceLocked moves pointer name forward to id by compare-and-swap. It
// never moves a pointer backwards (an id not newer than the current one
// leaves it alone) and never overwrites a pointer carrying a greater
// epoch: that means another writer took over, and we are fenced.
func (s *BlobStorage) advanceLocked(ctx context.Context, name, id string) error {
	for {
		p, etag, ok, err := s.readPointer(ctx, name, true)
		if err != nil {
			return err
		}
		if ok && p.Epoch > s.epoch {
			s.fenced = true
			return fmt.Errorf("pointer %s has epoch %d, ours is %d: %w", name, p.Epoch, s.epoch, ErrFenced)
		}
		if ok && p.ID != "" && p.ID >= id {
			return nil
		}
		next := bytes.NewReader(blobJSON(blobPointer{ID: id, Epoch: s.epoch}))
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
