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
	"github.com/tidemark-io/tidemark/internal/simbug"
)

// GCOptions configure one GC run.
type GCOptions struct {
	// DryRun computes and reports what a real run would delete, deleting
	// nothing: it only reads.
	DryRun bool
	// Now is the time ages are measured against (a test seam). Zero means
	// time.Now().
	Now time.Time
}

// GCReport says what a GC run deleted (or, with DryRun, would delete),
// and why.
type GCReport struct {
	// Retained lists the checkpoint ids kept, ascending.
	Retained []string `json:"retained"`
	// Dropped lists the checkpoint ids whose records and private files
	// were deleted, ascending (including ids with files but no record).
	Dropped []string `json:"dropped"`
	// Verdicts gives the decision on every checkpoint, with its reason.
	Verdicts []Verdict `json:"verdicts"`
	// Deletions lists every object deleted (or that a dry run would
	// delete), in the order of deletion, with its reason.
	Deletions []Deletion `json:"deletions"`
	// SharedKept, when not empty, says why no shared file was deleted.
	SharedKept string `json:"shared_kept,omitempty"`
	// Objects is the number of objects deleted, records included, pins
	// not.
	Objects int `json:"objects"`
	// Bytes is their total size.
	Bytes int64 `json:"bytes"`
	// SharedObjects is how many of Objects were unreferenced shared files.
	SharedObjects int `json:"shared_objects"`
	// RemoteObjects is how many of Objects were remote objects of state
	// in remote mode (DropRemoteUnreferenced, DropRemoteObsolete).
	RemoteObjects int `json:"remote_objects"`
	// RemoteKept, when not empty, says how many unreferenced remote
	// objects were kept for being the live writer's, and why.
	RemoteKept string `json:"remote_kept,omitempty"`
	// FilesKept, when not empty, says why this run deleted records but
	// no files (a restore began on a dropped checkpoint meanwhile).
	FilesKept string `json:"files_kept,omitempty"`
	// Pins is the number of expired restore pins deleted.
	Pins int `json:"pins"`
	// AbortedUploads is the number of incomplete multipart uploads
	// aborted (stores that have them, such as s3store).
	AbortedUploads int `json:"aborted_uploads"`
}

// GC applies retention (see planGC for every rule) and deletes what no
// retained checkpoint needs, beside a live writer or without one (the
// protocol is in the package documentation, "Garbage collection"). It
// reads the clock, _writer and both pointers, then lists the store and
// reads every record, decides (a pure plan with a reason for every
// decision, returned in the report), and deletes in the plan's order: a
// record before its files, so that a half-deleted checkpoint never looks
// whole. Only keys that parse under the layout grammar are considered:
// anything else in the prefix is left alone. Incomplete uploads older
// than Grace are aborted if the store has them (blobstore.UploadAborter).
//
// GC needs no writer role and writes nothing but deletions. Run by the
// writer (after Acquire), it also checks before each delete that no other
// writer took over (checkpoint.ErrFenced), and it runs under the same
// lock as Save. Run by anyone else, it first checks that the prefix is a
// Tidemark store (ErrForeignStore, ErrNoStore) and leaves the live
// writer's unfinished checkpoints and remote objects alone.
//
// A dry run (GCOptions.DryRun) lists and reads exactly what a real run
// would and reports what that run would delete at the same Now, deleting
// nothing. Savepoints are never touched.
func (s *Storage) GC(ctx context.Context, opts GCOptions) (rep GCReport, err error) {
	if !opts.DryRun {
		start := time.Now()
		defer func() {
			s.opts.Observer.Collected(GCStats{Deleted: rep.Objects, DeletedBytes: rep.Bytes, AbortedUploads: rep.AbortedUploads,
				ExpiredPins: rep.Pins, Duration: time.Since(start), Err: err})
		}()
	}
	rep = GCReport{Retained: []string{}, Dropped: []string{}, Verdicts: []Verdict{}, Deletions: []Deletion{}}
	// The clock first: whatever a writer creates after it is younger
	// than Grace, however short Grace is.
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// The writer's own run checks its fence; its dry run, like anyone
	// else's run, checks that the prefix is ours instead.
	writer := s.epoch != 0 && !opts.DryRun
	if writer {
		if err := s.checkWriterLocked(ctx); err != nil {
			return rep, fmt.Errorf("blobstorage: gc: %w", err)
		}
	} else if id, err := s.identity(ctx); err != nil {
		// The writer's Acquire checked this; anyone else checks it here,
		// so that nothing in a prefix that is not ours is deleted.
		return rep, fmt.Errorf("blobstorage: gc: %w", err)
	} else if id == storeEmpty {
		return rep, nil
	}
	inv, err := s.listInventory(ctx)
	if err != nil {
		return rep, fmt.Errorf("blobstorage: gc: %w", err)
	}
	popts := s.opts
	if simbug.On(simbug.NoGrace) {
		popts.Grace = 0
	}
	plan := planGC(inv, now, popts)
	rep.Verdicts = plan.verdicts
	for _, v := range plan.verdicts {
		if v.Keep {
			rep.Retained = append(rep.Retained, v.ID)
		} else {
			rep.Dropped = append(rep.Dropped, v.ID)
		}
	}
	switch {
	case plan.liveWriterKept > 0 && inv.live != nil:
		rep.RemoteKept = fmt.Sprintf("%d unreferenced remote objects of this writer's generation %s kept: its open state uses them (or another open of epoch %d created them)",
			plan.liveWriterKept, RemoteGeneration(inv.writerEpoch), inv.writerEpoch)
	case plan.liveWriterKept > 0:
		rep.RemoteKept = fmt.Sprintf("%d unreferenced remote objects under generation %s kept: only the writer of epoch %d knows which its open state uses",
			plan.liveWriterKept, RemoteGeneration(inv.writerEpoch), inv.writerEpoch)
	}
	if plan.sharedUnknown {
		rep.SharedKept = KeepUnreadable.Describe() + "; what it references is unknown, so no shared or remote file is deleted"
		s.opts.Logger.Warn("blobstorage: gc: shared files kept: a retained record could not be read")
	}

	deletedShared := map[string]bool{}
	defer func() { s.cache.dropKeys(deletedShared); s.forgetKnownLocked(deletedShared) }()
	// A dropped checkpoint a restore pinned after the listing keeps its
	// files, its own and the shared ones its record names.
	pinnedLate, pinnedKeys := map[string]bool{}, map[string]bool{}
	changed := map[string]bool{} // checkpoints whose record changed since it was read
	filesKept := false
	for i, d := range plan.deletions {
		if i == plan.records && !opts.DryRun {
			// Records are gone: a restore that pinned one of them after
			// our listing has read it by now, so it shows up here.
			why, err := s.pinsSince(ctx, inv, plan)
			if err != nil {
				return rep, fmt.Errorf("blobstorage: gc: %w", err)
			}
			if why != "" {
				rep.FilesKept = why
				filesKept = true
			}
		}
		if changed[d.Checkpoint] || (filesKept && d.Reason != DropExpiredPin) {
			continue
		}
		if !opts.DryRun {
			if pinnedLate[d.Checkpoint] || pinnedKeys[d.Key] {
				continue
			}
			err := s.deleteDecided(ctx, d, writer)
			if errors.Is(err, checkpoint.ErrFenced) || errors.Is(err, ErrNotWriter) {
				return rep, fmt.Errorf("blobstorage: gc: %w", err)
			}
			if errors.Is(err, blobstore.ErrPreconditionFailed) {
				// Rewritten since the listing (a writer reusing the id of
				// a dead writer's leftover): the plan is stale for it.
				changed[d.Checkpoint] = true
				s.opts.Logger.Info("blobstorage: gc: record changed since it was read: kept", "key", d.Key)
				continue
			}
			if err != nil {
				return rep, fmt.Errorf("blobstorage: gc: delete %q (%s): %w", d.Key, d.Reason, err)
			}
			s.opts.Logger.Debug("blobstorage: gc: deleted", "key", d.Key, "size", d.Size, "reason", d.Reason)
			if d.Checkpoint != "" && d.Key == recordKey(d.Checkpoint) {
				// A restore that pinned after the listing may have read
				// the record before it went: its files stay, and a later
				// GC removes them once the pin is gone.
				pinned, err := s.pinnedSince(ctx, d.Checkpoint, now)
				if err != nil {
					return rep, fmt.Errorf("blobstorage: gc: %w", err)
				}
				if pinned {
					pinnedLate[d.Checkpoint] = true
					for _, c := range inv.checkpoints {
						if c.id == d.Checkpoint && c.record != nil {
							for _, files := range c.record.Files {
								for _, f := range files {
									pinnedKeys[f.Key] = true
								}
							}
						}
					}
					s.opts.Logger.Info("blobstorage: gc: a restore pinned a dropped checkpoint; its files are kept", "id", d.Checkpoint)
				}
			}
		}
		rep.Deletions = append(rep.Deletions, d)
		switch d.Reason {
		case DropExpiredPin:
			rep.Pins++
			continue
		case DropUnreferenced:
			rep.SharedObjects++
			if !opts.DryRun {
				deletedShared[d.Key] = true
			}
		case DropRemoteUnreferenced, DropRemoteObsolete:
			rep.RemoteObjects++
			if !opts.DryRun {
				delete(s.remoteKnown, d.Key)
			}
		}
		rep.Objects++
		rep.Bytes += d.Size
	}
	rep.Dropped = slices.DeleteFunc(rep.Dropped, func(id string) bool { return changed[id] })

	// Every upload under the job's prefix older than Grace is a leftover
	// (of a save, a savepoint create, the job's sink): none legitimately
	// runs that long.
	if a, ok := blobstore.As[blobstore.UploadAborter](s.bs); ok && !opts.DryRun {
		if writer {
			if err := s.checkWriterLocked(ctx); err != nil {
				return rep, fmt.Errorf("blobstorage: gc: %w", err)
			}
		}
		n, err := a.AbortIncompleteUploads(ctx, "", s.opts.Grace)
		rep.AbortedUploads += n
		if err != nil {
			return rep, fmt.Errorf("blobstorage: gc: abort incomplete uploads: %w", err)
		}
	}
	return rep, nil
}

// pinnedSince reports whether a pin younger than PinTTL names id now.
func (s *Storage) pinnedSince(ctx context.Context, id string, now time.Time) (bool, error) {
	for o, err := range s.bs.List(ctx, pinKey(id, "")) {
		if err != nil {
			return false, fmt.Errorf("list pins of %q: %w", id, err)
		}
		if age(now, o.ModTime) < s.opts.PinTTL {
			return true, nil
		}
	}
	return false, nil
}

// deleteDecided deletes one object of the plan. A record is deleted only
// while it still has the ETag it was read with (ErrPreconditionFailed
// otherwise): a Stat just before narrows the race to that gap, and the
// store closes it where it can (blobstore.ConditionalDeleter). The Stat
// stays even then: MinIO accepts If-Match on DeleteObject and ignores it.
//
// Run by the writer, the fence is the last thing read before the delete
// (checkpoint.ErrFenced once another writer took over): no request of
// this run sits between the check and the delete, so a writer fenced
// meanwhile deletes at most the one it had in flight (docs/gc.md, "The
// fence window").
func (s *Storage) deleteDecided(ctx context.Context, d Deletion, writer bool) error {
	if d.etag != "" {
		info, err := s.bs.Stat(ctx, d.Key)
		switch {
		case errors.Is(err, blobstore.ErrNotFound):
			return nil
		case err != nil:
			return err
		case info.ETag != d.etag:
			return blobstore.ErrPreconditionFailed
		}
	}
	if writer {
		if err := s.checkWriterLocked(ctx); err != nil {
			return err
		}
	}
	if d.etag == "" {
		return s.bs.Delete(ctx, d.Key)
	}
	if c, ok := blobstore.As[blobstore.ConditionalDeleter](s.bs); ok {
		err := c.DeleteIfMatch(ctx, d.Key, d.etag)
		if errors.Is(err, blobstore.ErrNotFound) {
			return nil
		}
		if !errors.Is(err, errors.ErrUnsupported) {
			return err
		}
	}
	return s.bs.Delete(ctx, d.Key)
}

// pinsSince lists the pins again, between the deletion of records and
// that of files, and says why no file may be deleted ("" when files may
// be): a pin younger than PinTTL, absent from the first listing, on a
// checkpoint this run drops. Restore pins before it reads the record, and
// GC deletes the record before it looks again: one of the two sees the
// other.
func (s *Storage) pinsSince(ctx context.Context, inv inventory, plan gcPlan) (string, error) {
	seen := map[string]bool{}
	for _, o := range inv.pins {
		seen[o.Key] = true
	}
	dropped := map[string]bool{}
	for _, v := range plan.verdicts {
		if !v.Keep {
			dropped[v.ID] = true
		}
	}
	for o, err := range s.bs.List(ctx, dirPins) {
		if err != nil {
			return "", fmt.Errorf("list %s: %w", dirPins, err)
		}
		p, ok := parseKey(o.Key, s.opts.Classify)
		if ok && p.kind == kindPin && !seen[o.Key] && dropped[p.id] {
			return fmt.Sprintf("a restore of %s began during this run (%s): no file is deleted; a later run collects them", p.id, o.Key), nil
		}
	}
	return "", nil
}

// ErrListingUnsettled is wrapped by the refusal of a GC whose listing kept
// disagreeing with the pointers: a pointer moved during it, or the
// listing lags the store. Nothing was deleted; a later run may succeed.
var ErrListingUnsettled = errors.New("the listing did not settle")

// inventoryReads bounds how often listInventory starts again when a
// pointer it read names a record another GC deleted meanwhile.
const inventoryReads = 3

// listInventory lists and reads everything a GC run decides on. The
// writer epoch and the pointers are read before anything is listed: a
// record is written before a pointer names it, so the listing holds every
// record the pointers read name, and whatever the writer saves later
// either is younger than the run's clock or is kept as the live writer's.
func (s *Storage) listInventory(ctx context.Context) (inventory, error) {
	for i := 1; ; i++ {
		inv, retry, err := s.readInventory(ctx)
		if err == nil || !retry || i == inventoryReads {
			return inv, err
		}
	}
}

// readInventory is one attempt of listInventory; retry says that the
// store changed under it (a pointer moved on past a record that is gone).
func (s *Storage) readInventory(ctx context.Context) (inv inventory, retry bool, err error) {
	if inv.writerEpoch, err = s.readWriterEpoch(ctx); err != nil {
		return inv, false, err
	}
	if inv.writerEpoch != s.epoch {
		inv.otherWriter = inv.writerEpoch
	}
	latestCompleted, _, _, err := s.readPointer(ctx, keyLatestCompleted, false)
	if err != nil {
		return inv, false, err
	}
	latest, _, _, err := s.readPointer(ctx, keyLatest, false)
	if err != nil {
		return inv, false, err
	}
	inv.latest, inv.latestCompleted = latest.ID, latestCompleted.ID
	if inv.checkpoints, err = s.listCheckpoints(ctx); err != nil {
		return inv, false, err
	}
	// A pointer names a record that exists, and GC never deletes what a
	// pointer names: one missing from the listing was dropped by another
	// GC after the pointer moved on (then read again), or is damage, and
	// deciding by it could delete what a repair needs.
	for _, p := range []struct{ key, id string }{{keyLatestCompleted, latestCompleted.ID}, {keyLatest, latest.ID}} {
		if p.id == "" || slices.ContainsFunc(inv.checkpoints, func(c *listedCheckpoint) bool { return c.id == p.id && c.hasRecord }) {
			continue
		}
		now, _, _, err := s.readPointer(ctx, p.key, false)
		if err != nil {
			return inv, false, err
		}
		if now.ID != p.id {
			return inv, true, fmt.Errorf("%w: %s moved from %s to %s during the listing", ErrListingUnsettled, p.key, p.id, now.ID)
		}
		// A listing that lags the store (some S3-compatible servers, a
		// cache in front of one) misses a record just written.
		if ok, err := s.bs.Exists(ctx, recordKey(p.id)); err != nil {
			return inv, false, fmt.Errorf("check %s: %w", recordKey(p.id), err)
		} else if ok {
			return inv, true, fmt.Errorf("%w: the listing of %s lags the store: it misses %s, which %s names", ErrListingUnsettled, dirCheckpoints, recordKey(p.id), p.key)
		}
		return inv, false, fmt.Errorf("%s names %s, which has no record: %w (gc deletes nothing from a damaged store; see tidemark verify)", p.key, p.id, ErrCorrupt)
	}
	for o, err := range s.bs.List(ctx, dirShared) {
		if err != nil {
			return inv, false, fmt.Errorf("list %s: %w", dirShared, err)
		}
		if p, ok := parseKey(o.Key, s.opts.Classify); ok && p.kind == kindShared { // others are not ours: left alone
			inv.shared = append(inv.shared, o)
		}
	}
	for o, err := range s.bs.List(ctx, dirPins) {
		if err != nil {
			return inv, false, fmt.Errorf("list %s: %w", dirPins, err)
		}
		if p, ok := parseKey(o.Key, s.opts.Classify); ok && p.kind == kindPin {
			inv.pins = append(inv.pins, o)
		}
	}
	for o, err := range s.bs.List(ctx, dirRemote) {
		if err != nil {
			return inv, false, fmt.Errorf("list %s: %w", dirRemote, err)
		}
		if p, ok := parseKey(o.Key, s.opts.Classify); ok && p.kind == kindRemote {
			inv.remote = append(inv.remote, o)
		}
	}
	// The live set after the listing: an object listed that the state no
	// longer uses was dropped before this call; one it uses now and was
	// not listed is younger than the grace period.
	if inv.live, err = s.liveRemoteLocked(inv.writerEpoch); err != nil {
		return inv, false, err
	}
	return inv, false, nil
}

// listCheckpoints groups the objects under checkpoints/ by id, sorted by
// id, and reads each record.
func (s *Storage) listCheckpoints(ctx context.Context) ([]*listedCheckpoint, error) {
	var cps []*listedCheckpoint
	byID := map[string]*listedCheckpoint{}
	for o, err := range s.bs.List(ctx, dirCheckpoints) {
		if err != nil {
			return nil, fmt.Errorf("list checkpoints: %w", err)
		}
		p, ok := parseKey(o.Key, s.opts.Classify)
		if !ok || p.id == "" {
			continue // not ours (checkpoints/old/notes.txt): left alone
		}
		id, isRecord := p.id, p.kind == kindRecord
		c := byID[id]
		if c == nil {
			c = &listedCheckpoint{id: id, epochs: map[uint64]bool{}}
			byID[id] = c
			cps = append(cps, c)
		}
		c.epochs[p.epoch] = true
		c.objects = append(c.objects, o)
		if o.ModTime.After(c.newest) {
			c.newest = o.ModTime
		}
		if isRecord {
			c.hasRecord, c.recordInfo = true, o
		}
	}
	slices.SortFunc(cps, func(a, b *listedCheckpoint) int { return strings.Compare(a.id, b.id) })
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
