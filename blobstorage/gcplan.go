package blobstorage

import (
	"slices"
	"time"

	"github.com/tidemark-io/tidemark/blobstore"
)

// Reason says why GC keeps or deletes something. Every decision a GC run
// makes carries one, so that an operator can see why (gc --dry-run). It
// is a stable code (what JSON carries); Describe says it in words.
type Reason string

// Reasons to keep a checkpoint.
const (
	KeepPinned          Reason = "keep-pinned"
	KeepLatestCompleted Reason = "keep-latest-completed"
	KeepLatest          Reason = "keep-latest"
	KeepNewest          Reason = "keep-newest"
	KeepUnreadable      Reason = "keep-unreadable"
	KeepInProgress      Reason = "keep-in-progress"
	KeepLiveWriter      Reason = "keep-live-writer"
)

// Reasons to delete.
const (
	DropOld          Reason = "drop-old"
	DropAbandoned    Reason = "drop-abandoned"
	DropStale        Reason = "drop-stale"
	DropOrphan       Reason = "drop-orphan"
	DropUnreferenced Reason = "drop-unreferenced"
	DropLeftover     Reason = "drop-leftover"
	DropExpiredPin   Reason = "drop-expired-pin"
	// Remote objects (state in remote mode), see planGC.
	DropRemoteUnreferenced Reason = "drop-remote-unreferenced"
	DropRemoteObsolete     Reason = "drop-remote-obsolete"
)

var reasonText = map[Reason]string{
	KeepPinned:             "pinned by a restore in progress",
	KeepLatestCompleted:    "named by _latest-completed",
	KeepLatest:             "named by _latest",
	KeepNewest:             "one of the newest completed checkpoints retention keeps (Options.Keep)",
	KeepUnreadable:         "its record could not be read: kept rather than guessed at",
	KeepInProgress:         "younger than the grace period: a save may be in progress",
	KeepLiveWriter:         "newer than _latest and saved by the writer _writer names: it may still move a pointer to it",
	keepLiveWriter:         "under the generation of the live writer",
	DropOld:                "completed, older than the newest completed checkpoints retention keeps (Options.Keep)",
	DropAbandoned:          "prepared, older than the latest completed checkpoint: abandoned",
	DropStale:              "newer than the latest completed checkpoint but older than the grace period: a save that never completed",
	DropOrphan:             "files without a record, older than the grace period: a save that crashed",
	DropUnreferenced:       "shared file no retained checkpoint references, older than the grace period",
	DropLeftover:           "file another epoch saved under a kept checkpoint's id, which its record does not reference, older than the grace period: a failed or fenced save",
	DropExpiredPin:         "restore pin older than PinTTL",
	DropRemoteUnreferenced: "remote object of an earlier or fenced writer that no retained checkpoint references, older than the grace period",
	DropRemoteObsolete:     "remote object this writer's open state no longer uses and no retained checkpoint references, older than the grace period",
}

// Describe says the reason in words; a code it does not know, as is.
func (r Reason) Describe() string {
	if t, ok := reasonText[r]; ok {
		return t
	}
	return string(r)
}

// Verdict is GC's decision on one checkpoint.
type Verdict struct {
	ID     string `json:"id"`
	Keep   bool   `json:"keep"`
	Reason Reason `json:"reason"`
}

// Deletion is one object GC deletes (or, in a dry run, would delete).
type Deletion struct {
	Key    string `json:"key"`
	Size   int64  `json:"size"`
	Reason Reason `json:"reason"`
	// Checkpoint is the id the object belongs to ("" for a shared file).
	Checkpoint string `json:"checkpoint,omitempty"`
	// etag is a record's ETag as read: it is deleted only if unchanged.
	etag string
}

// listedCheckpoint is what a listing of checkpoints/<id>/ found.
type listedCheckpoint struct {
	id         string
	record     *Record // nil: no record, or one that could not be read
	recordInfo blobstore.ObjectInfo
	hasRecord  bool
	objects    []blobstore.ObjectInfo // every object under checkpoints/<id>/
	newest     time.Time
	epochs     map[uint64]bool // the writer epochs in its objects' keys
}

// live reports whether c is the live writer's (epoch) unfinished work:
// newer than _latest (latest) and saved, or being saved, under epoch.
func (c *listedCheckpoint) live(epoch uint64, latest string) bool {
	if epoch == 0 || (latest != "" && c.id <= latest) {
		return false
	}
	if c.record != nil {
		return c.record.Epoch == epoch
	}
	return c.epochs[epoch]
}

// inventory is everything a GC run reads before it decides.
type inventory struct {
	checkpoints     []*listedCheckpoint // sorted by id
	shared          []blobstore.ObjectInfo
	pins            []blobstore.ObjectInfo
	latest          string // id _latest names, or ""
	latestCompleted string // id _latest-completed names, or ""

	remote      []blobstore.ObjectInfo // under RemotePrefix
	writerEpoch uint64                 // the epoch _writer held before the listing (0: none)
	// otherWriter is writerEpoch when this GC is not run by that writer
	// (0 otherwise): its unfinished work is then left alone. The writer's
	// own GC holds the lock its saves take, and decides by Grace.
	otherWriter uint64
	// live is the writer's own view of its remote-mode state (UseRemote),
	// nil when this GC is not run by the writer of writerEpoch with one.
	live *liveRemote
}

// gcPlan is what GC decided, in the order the executor deletes: records
// before their files (a half-deleted checkpoint never looks whole), then
// unreferenced shared files, then expired pins.
type gcPlan struct {
	verdicts  []Verdict  // one per checkpoint, ascending id
	deletions []Deletion // in execution order
	records   int        // deletions[:records] are records, the rest files and pins
	// sharedUnknown is set when a retained record could not be read:
	// what it references is unknown, so no shared or remote file is
	// deleted.
	sharedUnknown bool
	// liveWriterKept counts the remote objects that would be deleted but
	// for being under the generation of a writer that may be live.
	liveWriterKept int
}

// planGC decides what to keep and what to delete. It is a pure function of
// what was listed, the clock and the options: every rule is a line below,
// and tests exercise it without a store.
//
// A checkpoint is kept, for the first reason that applies, when: a pin
// younger than PinTTL names it; a pointer names it; it is one of the Keep
// newest completed checkpoints up to _latest-completed; its record exists
// but cannot be read; or it is newer than _latest-completed (or has no
// record) and younger than Grace. Every other checkpoint is dropped: its
// record, then its files. Shared files that no kept record references are
// deleted once older than Grace, and none at all while a kept record is
// unreadable. Savepoints are never listed, so never touched.
//
// Remote objects (remote/<owner>/e<epoch>-<suffix>/…, created by state in
// remote mode) that a kept record references, or younger than Grace, are
// kept; so is every remote object while a kept record is unreadable, and
// any whose key carries no epoch. Of the others, those of the generation
// of the writer _writer names (writerEpoch) are left to that writer: a GC
// run by anyone else keeps them all, since only that writer knows what
// its open databases use; the writer's own GC (UseRemote) deletes those
// under its own prefixes that its databases no longer use
// (DropRemoteObsolete) and keeps the rest of its generation. Objects of
// every other epoch (earlier writers, fenced ones) are deleted
// (DropRemoteUnreferenced).
func planGC(inv inventory, now time.Time, opts Options) gcPlan {
	var p gcPlan
	pinned := map[string]bool{}
	for _, o := range inv.pins {
		id, _ := pinOfKey(o.Key)
		if age(now, o.ModTime) < opts.PinTTL {
			pinned[id] = true
		}
	}
	L := inv.latestCompleted
	// The Keep newest completed checkpoints up to L.
	newest := map[string]bool{}
	for i := len(inv.checkpoints) - 1; i >= 0 && len(newest) < opts.Keep; i-- {
		c := inv.checkpoints[i]
		if c.record != nil && c.record.Completed() && L != "" && c.id <= L {
			newest[c.id] = true
		}
	}
	kept := map[string]bool{}
	referenced := map[string]bool{}
	var drops []*listedCheckpoint
	for _, c := range inv.checkpoints {
		keep, reason := verdict(c, now, opts, L, inv.latest, pinned[c.id], newest[c.id], c.live(inv.otherWriter, inv.latest))
		p.verdicts = append(p.verdicts, Verdict{ID: c.id, Keep: keep, Reason: reason})
		if !keep {
			drops = append(drops, c)
			continue
		}
		kept[c.id] = true
		if c.hasRecord && c.record == nil {
			p.sharedUnknown = true
		}
		if c.record != nil {
			own := map[string]bool{}
			for _, files := range c.record.Files {
				for _, f := range files {
					referenced[f.Key] = true
					own[f.Key] = true
				}
			}
			// Another writer's save of the same id (a fenced or failed
			// one) left files its record does not name: they would
			// stay as long as the checkpoint is kept.
			for _, o := range c.objects {
				if e, ok := epochOfCheckpointFile(o.Key); ok && e != c.record.Epoch && !own[o.Key] && age(now, o.ModTime) >= opts.Grace {
					p.deletions = append(p.deletions, Deletion{Key: o.Key, Size: o.Size, Reason: DropLeftover, Checkpoint: c.id})
				}
			}
			for _, refs := range c.record.Remote {
				for _, r := range refs {
					referenced[r.Key] = true
				}
			}
		}
	}
	reasonOf := func(c *listedCheckpoint) Reason {
		return p.verdicts[slices.IndexFunc(p.verdicts, func(v Verdict) bool { return v.ID == c.id })].Reason
	}
	for _, c := range drops {
		if c.hasRecord {
			p.deletions = append(p.deletions, Deletion{Key: c.recordInfo.Key, Size: c.recordInfo.Size, Reason: reasonOf(c), Checkpoint: c.id, etag: c.recordInfo.ETag})
		}
	}
	p.records = len(p.deletions)
	for _, c := range drops {
		reason := reasonOf(c)
		for _, o := range c.objects {
			if c.hasRecord && o.Key == c.recordInfo.Key {
				continue
			}
			p.deletions = append(p.deletions, Deletion{Key: o.Key, Size: o.Size, Reason: reason, Checkpoint: c.id})
		}
	}
	if !p.sharedUnknown {
		for _, o := range inv.shared {
			if !referenced[o.Key] && age(now, o.ModTime) >= opts.Grace && !liveUpload(o.Key, inv) {
				p.deletions = append(p.deletions, Deletion{Key: o.Key, Size: o.Size, Reason: DropUnreferenced})
			}
		}
	}
	if !p.sharedUnknown {
		for _, o := range inv.remote {
			if referenced[o.Key] || age(now, o.ModTime) < opts.Grace {
				continue
			}
			why, del := remoteVerdict(o.Key, inv)
			if !del {
				if why == keepLiveWriter {
					p.liveWriterKept++
				}
				continue
			}
			p.deletions = append(p.deletions, Deletion{Key: o.Key, Size: o.Size, Reason: why})
		}
	}
	for _, o := range inv.pins {
		if age(now, o.ModTime) >= opts.PinTTL {
			id, _ := pinOfKey(o.Key)
			p.deletions = append(p.deletions, Deletion{Key: o.Key, Size: o.Size, Reason: DropExpiredPin, Checkpoint: id})
		}
	}
	return p
}

// verdict applies the retention rules to one checkpoint (see planGC).
func verdict(c *listedCheckpoint, now time.Time, opts Options, latestCompleted, latest string, pinned, newest, live bool) (keep bool, why Reason) {
	switch {
	case pinned:
		return true, KeepPinned
	case c.id == latestCompleted:
		return true, KeepLatestCompleted
	case c.id == latest:
		return true, KeepLatest
	case newest:
		return true, KeepNewest
	case c.hasRecord && c.record == nil:
		return true, KeepUnreadable
	case live:
		return true, KeepLiveWriter
	case !c.hasRecord:
		if age(now, c.newest) < opts.Grace {
			return true, KeepInProgress
		}
		return false, DropOrphan
	case latestCompleted == "" || c.id > latestCompleted:
		if age(now, c.recordInfo.ModTime) < opts.Grace {
			return true, KeepInProgress
		}
		return false, DropStale
	case c.record.Completed():
		return false, DropOld
	default:
		return false, DropAbandoned
	}
}

// liveUpload reports whether the shared file at key was uploaded by the
// live writer (inventory.otherWriter) for a checkpoint newer than
// _latest: a save in progress, or one whose record no pointer names yet.
func liveUpload(key string, inv inventory) bool {
	id, epoch, ok := sharedOrigin(key)
	return ok && inv.otherWriter != 0 && epoch == inv.otherWriter && (inv.latest == "" || id > inv.latest)
}

// keepLiveWriter is remoteVerdict's reason to keep an object of the
// generation of the writer _writer names (not a deletion's reason: kept
// objects are counted in GCReport.RemoteKept).
const keepLiveWriter Reason = "keep-live-writer-generation"

// remoteVerdict decides on a remote object that no kept record references
// and that is older than Grace (see planGC): del says to delete it, for
// reason why; a kept object has why "" or keepLiveWriter.
func remoteVerdict(key string, inv inventory) (why Reason, del bool) {
	epoch, ok := remoteOfKey(key)
	switch {
	case !ok:
		return "", false // not a key of this layout: left alone
	case epoch != inv.writerEpoch:
		return DropRemoteUnreferenced, true
	case inv.live == nil || inv.live.keys[key] || !hasAnyPrefix(key, inv.live.prefixes):
		// Only the live writer knows what its databases use; under its
		// own prefixes it says so (live), elsewhere in its generation
		// (another open of the same epoch) it cannot.
		return keepLiveWriter, false
	default:
		return DropRemoteObsolete, true
	}
}
