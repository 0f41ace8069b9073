package blobstorage

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tidemark-io/tidemark/archive"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/internal/simbug"
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
	// Pins is the number of expired restore pins deleted.
	Pins int `json:"pins"`
	// AbortedUploads is the number of incomplete multipart uploads
	// aborted (stores that have them, such as s3store).
	AbortedUploads int `json:"aborted_uploads"`
}

// GC applies retention (see planGC for every rule) and deletes what no
// retained checkpoint needs. It lists the store, reads every record and
// both pointers, decides (a pure plan with a reason for every decision,
// returned in the report), and then deletes in the plan's order: a record
// before its files, so that a half-deleted checkpoint never looks whole.
// Incomplete uploads older than Grace are aborted if the store has them
// (blobstore.UploadAborter, found through any decorator).
//
// Savepoints are never touched. A real GC needs the writer role
// (ErrNotWriter without Acquire) and checks, before each delete, that no
// other writer took over (checkpoint.ErrFenced). It runs under the same
// lock as Save, so it never deletes a shared file a Save of this Storage
// is about to reference.
//
// A dry run (GCOptions.DryRun) needs no writer role and writes nothing:
// it lists and reads exactly what a real run would, and reports what that
// run would delete at the same Now. Against a store another process is
// writing, the report is a snapshot: that writer may save and move the
// pointers after it, which a later real run takes into account.
//
// Remote objects of state in remote mode (see the package doc, "Remote
// mode") are deleted by the same plan: unreferenced, past Grace, and not
// the live writer's generation unless this Storage is that writer with
// UseRemote. A real run by another process (tidemark gc --confirm) takes
// the writer role first, so the job it fences is no longer the live
// writer there and its unreferenced objects are deleted, where a dry run
// keeps them (GCReport.RemoteKept says how many).
func (s *Storage) GC(ctx context.Context, opts GCOptions) (rep GCReport, err error) {
	if !opts.DryRun {
		start := time.Now()
		defer func() {
			s.opts.Observer.Collected(GCStats{Deleted: rep.Objects, DeletedBytes: rep.Bytes, AbortedUploads: rep.AbortedUploads,
				ExpiredPins: rep.Pins, Duration: time.Since(start), Err: err})
		}()
	}
	rep = GCReport{Retained: []string{}, Dropped: []string{}, Verdicts: []Verdict{}, Deletions: []Deletion{}}
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// Only a run that deletes needs the writer role: a dry run must not
	// take it (Acquire would fence the live job it is inspecting), and
	// without it nothing below writes.
	if !opts.DryRun {
		if err := s.checkWriterLocked(ctx); err != nil {
			return rep, fmt.Errorf("blobstorage: gc: %w", err)
		}
	} else if _, err := s.identity(ctx); err != nil {
		// A real run's Acquire checked this; a dry run checks it too, so
		// that it never reports deletions in a store that is not ours.
		return rep, fmt.Errorf("blobstorage: gc: %w", err)
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
		rep.SharedKept = string(KeepUnreadable) + "; what it references is unknown, so no shared or remote file is deleted"
		s.opts.Logger.Warn("blobstorage: gc: shared files kept: a retained record could not be read")
	}

	deletedShared := map[string]bool{}
	defer func() { s.cache.dropKeys(deletedShared); s.forgetKnownLocked(deletedShared) }()
	// A dropped checkpoint a restore pinned after the listing keeps its
	// files, its own and the shared ones its record names.
	pinnedLate, pinnedKeys := map[string]bool{}, map[string]bool{}
	for _, d := range plan.deletions {
		if !opts.DryRun {
			if pinnedLate[d.Checkpoint] || pinnedKeys[d.Key] {
				continue
			}
			// The fence is checked before every delete: a writer that
			// was replaced mid-GC must stop deleting at once.
			if err := s.checkWriterLocked(ctx); err != nil {
				return rep, fmt.Errorf("blobstorage: gc: %w", err)
			}
			if err := s.bs.Delete(ctx, d.Key); err != nil {
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

	// Every upload under the job's prefix older than Grace is a leftover
	// (of a save, a savepoint create, the job's sink): none legitimately
	// runs that long.
	if a, ok := blobstore.As[blobstore.UploadAborter](s.bs); ok && !opts.DryRun {
		if err := s.checkWriterLocked(ctx); err != nil {
			return rep, fmt.Errorf("blobstorage: gc: %w", err)
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

// listInventory lists and reads everything a GC run decides on.
func (s *Storage) listInventory(ctx context.Context) (inventory, error) {
	var inv inventory
	var err error
	// _writer before anything is listed: a writer that takes over later
	// creates only objects younger than the grace period.
	if inv.writerEpoch, err = s.readWriterEpoch(ctx); err != nil {
		return inv, err
	}
	if inv.checkpoints, err = s.listCheckpoints(ctx); err != nil {
		return inv, err
	}
	latestCompleted, _, _, err := s.readPointer(ctx, keyLatestCompleted, false)
	if err != nil {
		return inv, err
	}
	latest, _, _, err := s.readPointer(ctx, keyLatest, false)
	if err != nil {
		return inv, err
	}
	inv.latest, inv.latestCompleted = latest.ID, latestCompleted.ID
	// A pointer names a record that exists: a writer writes the record
	// before it moves a pointer to it, and GC never deletes what a
	// pointer names. One that names no record (listed, or written since
	// the listing) is damage: deciding what to keep by it could delete
	// what a repair needs, so GC deletes nothing.
	for _, p := range []struct{ key, id string }{{keyLatestCompleted, latestCompleted.ID}, {keyLatest, latest.ID}} {
		if p.id == "" || slices.ContainsFunc(inv.checkpoints, func(c *listedCheckpoint) bool { return c.id == p.id && c.hasRecord }) {
			continue
		}
		ok, err := s.bs.Exists(ctx, recordKey(p.id))
		if err != nil {
			return inv, fmt.Errorf("check the record %s names: %w", p.key, err)
		}
		if !ok {
			return inv, fmt.Errorf("%s names %s, which has no record: %w (gc deletes nothing from a damaged store; see tidemark verify)", p.key, p.id, archive.ErrCorrupt)
		}
	}
	for o, err := range s.bs.List(ctx, dirShared) {
		if err != nil {
			return inv, fmt.Errorf("list %s: %w", dirShared, err)
		}
		inv.shared = append(inv.shared, o)
	}
	for o, err := range s.bs.List(ctx, dirPins) {
		if err != nil {
			return inv, fmt.Errorf("list %s: %w", dirPins, err)
		}
		if _, ok := pinOfKey(o.Key); ok { // others are not ours: left alone
			inv.pins = append(inv.pins, o)
		}
	}
	for o, err := range s.bs.List(ctx, dirRemote) {
		if err != nil {
			return inv, fmt.Errorf("list %s: %w", dirRemote, err)
		}
		inv.remote = append(inv.remote, o)
	}
	// The live set after the listing: an object listed that the state no
	// longer uses was dropped before this call; one it uses now and was
	// not listed is younger than the grace period.
	if inv.live, err = s.liveRemoteLocked(inv.writerEpoch); err != nil {
		return inv, err
	}
	return inv, nil
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
		id, isRecord, ok := checkpointOfKey(o.Key)
		if !ok {
			continue // not ours: leave it alone
		}
		c := byID[id]
		if c == nil {
			c = &listedCheckpoint{id: id}
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
