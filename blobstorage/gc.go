package blobstorage

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
)

// GCOptions configure one GC run.
type GCOptions struct {
	// DryRun computes and reports what a real run would delete, deleting
	// nothing. A dry run only reads: it needs no writer role (no Acquire)
	// and writes nothing (no _writer, pointer or pin), so an operator can
	// run it against a store a live job is writing without fencing it.
	DryRun bool
	// Now is the time ages are measured against (a test seam). Zero means
	// time.Now().
	Now time.Time
}

// GCReport says what a GC run deleted (or, with DryRun, would delete).
type GCReport struct {
	// Retained lists the checkpoint ids kept, ascending.
	Retained []string
	// Dropped lists the checkpoint ids whose records and private files
	// were deleted, ascending (including ids with files but no record).
	Dropped []string
	// Objects is the number of objects deleted, records included.
	Objects int
	// Bytes is their total size.
	Bytes int64
	// SharedObjects is how many of Objects were unreferenced shared files.
	SharedObjects int
	// Pins is the number of expired restore pins deleted.
	Pins int
	// AbortedUploads is the number of incomplete multipart uploads
	// aborted (stores that have them, such as s3store).
	AbortedUploads int
}

// uploadAborter is implemented by stores that can leave incomplete
// multipart uploads behind (s3store.Store).
type uploadAborter interface {
	AbortIncompleteUploads(ctx context.Context, prefix string, olderThan time.Duration) (int, error)
}

// gcCheckpoint is what a listing of checkpoints/<id>/ found.
type gcCheckpoint struct {
	id         string
	record     *Record // nil: no record, or one that could not be read
	recordInfo blobstore.ObjectInfo
	hasRecord  bool
	objects    []blobstore.ObjectInfo // every object under checkpoints/<id>/
	newest     time.Time
}

// GC applies retention and deletes what no retained checkpoint needs:
//
//   - Retained: the Keep newest completed checkpoints up to the one
//     _latest-completed names; the one _latest names (checkpoint.Recover reads it);
//     every record newer than _latest-completed younger than Grace (a
//     save in progress); every checkpoint pinned by a restore younger
//     than PinTTL.
//   - Dropped: every other record (older completed ones, prepared ones
//     that were abandoned) and, after Grace, directories with files but
//     no record (a save that crashed before its record). A record is
//     deleted before its files, so a half-deleted checkpoint never looks
//     whole.
//   - Shared files that no retained record references, once older than
//     Grace (an unreferenced young file may belong to a save in
//     progress). Nothing is reference-counted: what is kept is exactly
//     what the retained records name. A record GC cannot read is kept,
//     and while one is, no shared file is deleted: what it names is
//     unknown.
//   - Incomplete multipart uploads older than Grace, if the store has
//     them, and restore pins older than PinTTL.
//
// Savepoints are never touched. A real GC needs the writer role
// (ErrNotWriter without Acquire) and checks, before each delete, that no
// other writer took over (checkpoint.ErrFenced). It runs under the same lock as
// Save, so it never deletes a shared file a Save of this Storage is
// about to reference.
//
// A dry run (GCOptions.DryRun) needs no writer role and writes nothing:
// it lists and reads exactly what a real run would, and reports what that
// run would delete at the same Now. Against a store another process is
// writing, the report is a snapshot: that writer may save and move the
// pointers after it, which a later real run takes into account.
func (s *Storage) GC(ctx context.Context, opts GCOptions) (GCReport, error) {
	var rep GCReport
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// Only a run that deletes needs the writer role: a dry run must not
	// take it (Acquire would fence the live job it is inspecting), and
	// without it nothing below writes, since every write is guarded by
	// !opts.DryRun.
	if !opts.DryRun {
		if err := s.checkWriterLocked(ctx); err != nil {
			return rep, fmt.Errorf("checkpoint: gc: %w", err)
		}
	}

	cps, err := s.listCheckpoints(ctx)
	if err != nil {
		return rep, fmt.Errorf("checkpoint: gc: %w", err)
	}
	latestDone, _, _, err := s.readPointer(ctx, keyLatestCompleted, false)
	if err != nil {
		return rep, fmt.Errorf("checkpoint: gc: %w", err)
	}
	latest, _, _, err := s.readPointer(ctx, keyLatest, false)
	if err != nil {
		return rep, fmt.Errorf("checkpoint: gc: %w", err)
	}
	pinned, expiredPins, err := s.listPins(ctx, now)
	if err != nil {
		return rep, fmt.Errorf("checkpoint: gc: %w", err)
	}

	// Retention. cps is sorted by id, so walking it backwards meets the
	// newest completed checkpoints first.
	retained := map[string]bool{}
	kept := 0
	L := latestDone.ID
	for i := len(cps) - 1; i >= 0; i-- {
		c := cps[i]
		switch {
		case pinned[c.id] || c.id == latest.ID || c.id == L:
			retained[c.id] = true
		case c.hasRecord && c.record == nil:
			// A record we cannot read: keep it rather than guess.
			retained[c.id] = true
		case c.hasRecord && (L == "" || c.id > L):
			retained[c.id] = age(now, c.recordInfo.ModTime) < s.opts.Grace
		case !c.hasRecord:
			retained[c.id] = age(now, c.newest) < s.opts.Grace
		}
		if c.hasRecord && c.record != nil && c.record.Completed() && L != "" && c.id <= L {
			if kept < s.opts.Keep {
				retained[c.id] = true
			}
			kept++
		}
	}
	referenced := map[string]bool{}
	unknownRefs := false // a retained record we could not read
	for _, c := range cps {
		if retained[c.id] {
			rep.Retained = append(rep.Retained, c.id)
			if c.hasRecord && c.record == nil {
				unknownRefs = true
			}
			if c.record != nil {
				for _, files := range c.record.Files {
					for _, f := range files {
						referenced[f.Key] = true
					}
				}
			}
		}
	}

	del := func(o blobstore.ObjectInfo) error {
		if !opts.DryRun {
			// The fence is checked before every delete: a writer that
			// was replaced mid-GC must stop deleting at once.
			if err := s.checkWriterLocked(ctx); err != nil {
				return err
			}
			if err := s.bs.Delete(ctx, o.Key); err != nil {
				return err
			}
			s.opts.Logger.Debug("checkpoint: gc: deleted", "key", o.Key, "size", o.Size)
		}
		rep.Objects++
		rep.Bytes += o.Size
		return nil
	}

	for _, c := range cps {
		if retained[c.id] {
			continue
		}
		rep.Dropped = append(rep.Dropped, c.id)
		if c.hasRecord {
			if err := del(c.recordInfo); err != nil {
				return rep, fmt.Errorf("checkpoint: gc: drop %q: %w", c.id, err)
			}
		}
		for _, o := range c.objects {
			if o.Key == recordKey(c.id) {
				continue
			}
			if err := del(o); err != nil {
				return rep, fmt.Errorf("checkpoint: gc: drop %q: %w", c.id, err)
			}
		}
	}

	deletedShared := map[string]bool{}
	defer func() { s.cache.dropKeys(deletedShared) }()
	var shared []blobstore.ObjectInfo
	if unknownRefs {
		// A retained record we could not read names shared files we do
		// not know: any unreferenced-looking file may be one of them
		// (the newest tables of _latest-completed, if its read failed).
		// Delete none; a later run whose reads succeed collects them.
		s.opts.Logger.Warn("checkpoint: gc: shared files kept: a retained record could not be read")
	} else {
		for o, err := range s.bs.List(ctx, dirShared) {
			if err != nil {
				return rep, fmt.Errorf("checkpoint: gc: list shared: %w", err)
			}
			if !referenced[o.Key] && age(now, o.ModTime) >= s.opts.Grace {
				shared = append(shared, o)
			}
		}
	}
	for _, o := range shared {
		if err := del(o); err != nil {
			return rep, fmt.Errorf("checkpoint: gc: shared %q: %w", o.Key, err)
		}
		rep.SharedObjects++
		if !opts.DryRun {
			deletedShared[o.Key] = true
		}
	}

	if a, ok := s.bs.(uploadAborter); ok && !opts.DryRun {
		for _, prefix := range []string{dirCheckpoints, dirShared} {
			if err := s.checkWriterLocked(ctx); err != nil {
				return rep, fmt.Errorf("checkpoint: gc: %w", err)
			}
			n, err := a.AbortIncompleteUploads(ctx, prefix, s.opts.Grace)
			rep.AbortedUploads += n
			if err != nil {
				return rep, fmt.Errorf("checkpoint: gc: abort uploads: %w", err)
			}
		}
	}

	for _, o := range expiredPins {
		if !opts.DryRun {
			if err := s.checkWriterLocked(ctx); err != nil {
				return rep, fmt.Errorf("checkpoint: gc: %w", err)
			}
			if err := s.bs.Delete(ctx, o.Key); err != nil {
				return rep, fmt.Errorf("checkpoint: gc: pin %q: %w", o.Key, err)
			}
		}
		rep.Pins++
	}
	return rep, nil
}

// listCheckpoints groups the objects under checkpoints/ by id, sorted by
// id, and reads each record.
func (s *Storage) listCheckpoints(ctx context.Context) ([]*gcCheckpoint, error) {
	var cps []*gcCheckpoint
	byID := map[string]*gcCheckpoint{}
	for o, err := range s.bs.List(ctx, dirCheckpoints) {
		if err != nil {
			return nil, fmt.Errorf("list checkpoints: %w", err)
		}
		id, isRecord, ok := checkpointOfKey(o.Key)
		if !ok {
			continue // not ours: leave it alone
		}
		c := byID[id]
		if c == nil {
			c = &gcCheckpoint{id: id}
			byID[id] = c
			cps = append(cps, c)
		}
		c.objects = append(c.objects, o)
		if o.ModTime.After(c.newest) {
			c.newest = o.ModTime
		}
		if isRecord {
			c.hasRecord, c.recordInfo = true, o
		}
	}
	slices.SortFunc(cps, func(a, b *gcCheckpoint) int { return strings.Compare(a.id, b.id) })
	for _, c := range cps {
		if !c.hasRecord {
			continue
		}
		rec, err := s.readRecord(ctx, c.id)
		switch {
		case errors.Is(err, checkpoint.ErrNotFound):
			c.hasRecord = false // deleted since the listing
		case err != nil && ctx.Err() != nil:
			return nil, err
		case err != nil:
			s.opts.Logger.Warn("checkpoint: gc: unreadable record kept", "id", c.id, "err", err)
		default:
			c.record = rec
		}
	}
	return cps, nil
}

// listPins returns the ids pinned by a pin younger than PinTTL, and the
// expired pins.
func (s *Storage) listPins(ctx context.Context, now time.Time) (map[string]bool, []blobstore.ObjectInfo, error) {
	pinned := map[string]bool{}
	var expired []blobstore.ObjectInfo
	for o, err := range s.bs.List(ctx, dirPins) {
		if err != nil {
			return nil, nil, fmt.Errorf("list pins: %w", err)
		}
		id, ok := pinOfKey(o.Key)
		if !ok {
			continue
		}
		if age(now, o.ModTime) < s.opts.PinTTL {
			pinned[id] = true
		} else {
			expired = append(expired, o)
		}
	}
	return pinned, expired, nil
}
