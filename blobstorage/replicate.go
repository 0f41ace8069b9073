package blobstorage

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
)

// Defaults of ReplicateOptions.
const (
	// DefaultReplicateInterval is how often a Replicator polls the
	// source's latest completed checkpoint (ReplicateOptions.Interval).
	DefaultReplicateInterval = 500 * time.Millisecond
	// DefaultReplicateGCEvery is how many checkpoints a Replicator
	// copies between two collections of the replica, as the job runtime
	// collects its store every 5 checkpoints.
	DefaultReplicateGCEvery = 5
)

// replicatorWriter starts the writer name (in _writer) of a Replicator:
// a replica whose last writer was not one has been written to by a job
// or a tool, and a Replicator refuses to take it over (ErrNotReplica).
const replicatorWriter = "replicator/"

// probeRange bounds the gap of checkpoint ids a pass reads one by one
// (a GET each); a wider gap is listed.
const probeRange = 256

// errSourceDropped is a pass's error when the source's retention dropped
// the checkpoint being copied: not fatal, the next pass copies a newer.
var errSourceDropped = errors.New("checkpoint gone from the source")

// ErrNotReplica is returned (wrapped) by Replicator.Start, before
// anything is written, for a destination whose writer role was last
// taken by something other than a Replicator (a job that failed over to
// it, a savepoint restore, gc): replicating into it would fork that
// job's history, or fence it.
var ErrNotReplica = errors.New("blobstorage: the destination is not a replica: its writer is not a replicator")

// ReplicateOptions configure a Replicator. The zero value is usable.
type ReplicateOptions struct {
	// Interval is how often Run polls the source's latest completed
	// checkpoint. Default: DefaultReplicateInterval.
	Interval time.Duration
	// Keep is the number of completed checkpoints the replica retains:
	// set it to the job's Options.Keep. Default: DefaultKeep.
	Keep int
	// GCEvery runs the replica's GC after every GCEvery checkpoints
	// copied (a GC lists the replica and reads every record: not worth
	// it after every copy). Default: DefaultReplicateGCEvery.
	GCEvery int
	// Grace, Concurrency and PinTTL are the replica Storage's
	// (see Options). Defaults as there.
	Grace       time.Duration
	Concurrency int
	PinTTL      time.Duration
	// Name identifies this replicator in the replica's _writer and
	// status. Default: "<hostname>-<pid>".
	Name string
	// Source names the source store in the replica's status (say, its
	// URL without secrets). Default: none.
	Source string
	// Observer hears of the recovery point and every checkpoint copied
	// (for metrics; see package metrics). Default: none.
	Observer ReplicationObserver
	// StorageObserver and Logger are the replica Storage's Observer
	// (its GC, fencing) and Logger. Default: none.
	StorageObserver Observer
	Logger          *slog.Logger
}

// ReplicationObserver hears what a Replicator does. Behind may be called
// from Run's watcher goroutine while a pass runs: implementations are
// safe for concurrent use.
type ReplicationObserver interface {
	// Behind is called at every poll with the time the source completed
	// the oldest of its checkpoints newer than the replica's latest
	// completed one, or the zero time when the replica holds the
	// source's latest completed checkpoint: the recovery point at time
	// t is t - since (see Replicator.RecoveryPoint).
	Behind(since time.Time)
	// Replicated is called after each checkpoint copied (or failed).
	Replicated(ReplicationStats)
}

// ReplicationStats describe one checkpoint copied to the replica.
type ReplicationStats struct {
	// ID is the checkpoint's id.
	ID string
	// Objects and Bytes are what was copied; SkippedObjects and
	// SkippedBytes what the replica held already (an interrupted copy's,
	// or shared with an earlier checkpoint).
	Objects, SkippedObjects int
	Bytes, SkippedBytes     int64
	// Completed is when the source completed the checkpoint (its
	// record's modification time in the source store).
	Completed time.Time
	// Duration is how long the copy took; Err its failure, if any.
	Duration time.Duration
	Err      error
}

type nopReplicationObserver struct{}

func (nopReplicationObserver) Behind(time.Time)            {}
func (nopReplicationObserver) Replicated(ReplicationStats) {}

// ReplicationStatus is the content of a replica's _replication object:
// written by its Replicator when it takes the writer role, after every
// checkpoint it copies, when it falls behind, and at least once a minute
// while it polls.
type ReplicationStatus struct {
	// Source names the source store (ReplicateOptions.Source).
	Source string `json:"source,omitempty"`
	// Replicator is the writer name of the replicator; Epoch its epoch
	// in the replica.
	Replicator string `json:"replicator"`
	Epoch      uint64 `json:"epoch"`
	// Job is the job replicated (checkpoint.CheckpointData.JobID).
	Job string `json:"job,omitempty"`
	// Checkpoint is the replica's latest completed checkpoint, copied
	// at Replicated; SourceCompleted is when the source completed it.
	Checkpoint      string    `json:"checkpoint,omitempty"`
	SourceCompleted time.Time `json:"source_completed,omitzero"`
	Replicated      time.Time `json:"replicated,omitzero"`
	// BehindSince is the time the source completed the oldest of its
	// checkpoints newer than Checkpoint, zero when the replicator last
	// found the replica caught up: the recovery point is the time since.
	BehindSince time.Time `json:"behind_since,omitzero"`
	// Updated is when the replicator wrote this status.
	Updated time.Time `json:"updated"`
}

// RecoveryPoint is the recovery point the status states at time now: now
// - BehindSince, or 0 when the replica was caught up at Updated.
func (st *ReplicationStatus) RecoveryPoint(now time.Time) time.Duration {
	if st.BehindSince.IsZero() {
		return 0
	}
	return max(now.Sub(st.BehindSince), 0)
}

// ReadReplicationStatus reads the status a Replicator keeps in the
// replica bs; nil with no error when there is none (bs is no replica).
func ReadReplicationStatus(ctx context.Context, bs blobstore.Blobstore) (*ReplicationStatus, error) {
	rc, err := bs.Get(ctx, keyReplication)
	if errors.Is(err, blobstore.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("blobstorage: read %s: %w", keyReplication, err)
	}
	defer rc.Close()
	b, err := checkpoint.ReadRecordBytes(rc)
	if err != nil {
		return nil, fmt.Errorf("blobstorage: read %s: %w", keyReplication, err)
	}
	var st ReplicationStatus
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("blobstorage: read %s: %w: %w", keyReplication, ErrCorrupt, err)
	}
	return &st, nil
}

// Replicator copies every completed checkpoint of a job from one store
// (the source, read only) to another (the replica, of which it is the
// writer), so that the replica's latest completed checkpoint is always
// one it can restore: for each checkpoint, every object the record
// names first (state files, a worker's part files, remote objects, each
// checked against the record's size and SHA-256 as it streams), then
// the record, then the pointers. Objects are named once and never
// rewritten, so one the replica holds (with the recorded size) is not
// sent again, and a replication interrupted anywhere resumes where it
// stopped. When it lags, a pass copies only the newest Keep checkpoints
// the replica lacks: retention would drop the older ones at once.
//
// The replica is a store of the same job: the records are copied as
// they are, with their job id, and a source of another job than the
// checkpoints the replica holds is refused (checkpoint.ErrOtherJob).
// The Replicator takes the replica's writer role (Start), so a second
// Replicator fences the first, and a job that fails over to the replica
// (Acquire there) fences the Replicator and resumes from the latest
// checkpoint copied. The replica's writer epoch is kept above the
// epochs of the records it holds, so that the job's writer there owns
// them as it owns its own. A Replicator refuses (ErrNotReplica) a
// replica whose writer role another writer took since.
//
// The recovery point at time t is t - T, where T is when the source
// completed the oldest of its checkpoints newer than the replica's
// latest completed one (Record.CompletedAt, on the source writer's
// clock; for older records the modification time of the record in the
// source store), and 0 when the replica holds the source's latest
// completed checkpoint: how long the replica has lacked a checkpoint the
// source had. Losing the source at t loses at most the work of that span
// plus one checkpoint interval.
type Replicator struct {
	src, dst *Storage
	opts     ReplicateOptions
	obs      ReplicationObserver
	now      func() time.Time

	started bool
	known   map[string]int64 // replica keys with their sizes (listed at Start, then kept)
	last    string           // the replica's latest completed checkpoint
	job     string           // its job
	status  ReplicationStatus
	etag    string // of the status we last wrote
	unswept int    // checkpoints copied since the replica's last GC

	mu     sync.Mutex
	behind time.Time // see RecoveryPoint
}

// NewReplicator returns a Replicator from the store src to the replica
// dst (prefix them with blobstore.WithPrefix as the job does). It does no
// I/O.
func NewReplicator(src, dst blobstore.Blobstore, opts ReplicateOptions) *Replicator {
	if opts.Interval <= 0 {
		opts.Interval = DefaultReplicateInterval
	}
	if opts.GCEvery <= 0 {
		opts.GCEvery = DefaultReplicateGCEvery
	}
	if opts.Name == "" {
		host, _ := os.Hostname()
		opts.Name = host + "-" + strconv.Itoa(os.Getpid())
	}
	obs := opts.Observer
	if obs == nil {
		obs = nopReplicationObserver{}
	}
	dstOpts := Options{Keep: opts.Keep, Grace: opts.Grace, Concurrency: opts.Concurrency, PinTTL: opts.PinTTL,
		WriterName: replicatorWriter + opts.Name, Observer: opts.StorageObserver, Logger: opts.Logger}
	return &Replicator{
		src:  New(src, "", Options{Concurrency: opts.Concurrency}),
		dst:  New(dst, "", dstOpts),
		opts: opts,
		obs:  obs,
		now:  time.Now,
	}
}

// Replica returns the Storage of the replica (for loads; the Replicator
// holds its writer role).
func (r *Replicator) Replica() *Storage { return r.dst }

// RecoveryPoint returns the recovery point at now (see Replicator): 0
// when the replica held the source's latest completed checkpoint at the
// last poll.
func (r *Replicator) RecoveryPoint(now time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.behind.IsZero() {
		return 0
	}
	return max(now.Sub(r.behind), 0)
}

func (r *Replicator) setBehind(since time.Time) {
	r.mu.Lock()
	r.behind = since
	r.mu.Unlock()
	r.obs.Behind(since)
}

func (r *Replicator) behindSince() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.behind
}

func (r *Replicator) lastCopied() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// noteBehind records that the replica, whose latest checkpoint was last,
// lacks a checkpoint the source completed at since, unless the replica
// has moved on meanwhile or has lacked one since earlier (the source's
// GC may have dropped that older one since).
func (r *Replicator) noteBehind(last string, since time.Time) {
	r.mu.Lock()
	if r.last != last || (!r.behind.IsZero() && r.behind.Before(since)) {
		r.mu.Unlock()
		return
	}
	r.behind = since
	r.mu.Unlock()
	r.obs.Behind(since)
}

// Start checks the replica, reading only, and then takes its writer
// role: it refuses, writing nothing, a replica whose last writer was not
// a replicator (ErrNotReplica) and one holding the checkpoints of
// another job than the source's latest (checkpoint.ErrOtherJob); a
// replica that is a foreign prefix, or whose endpoint does not enforce
// conditional writes, is refused by Acquire. Run and Once call it first.
func (r *Replicator) Start(ctx context.Context) error {
	if r.started {
		return nil
	}
	var w writerRecord
	_, err := r.dst.getJSON(ctx, keyWriter, &w, false)
	switch {
	case errors.Is(err, blobstore.ErrNotFound):
	case err != nil:
		return fmt.Errorf("blobstorage: replicate: read %s: %w", keyWriter, err)
	case !isReplicator(w.Writer):
		return fmt.Errorf("blobstorage: replicate: %w: %q took the writer role (epoch %d) at %s: a job may run there",
			ErrNotReplica, w.Writer, w.Epoch, w.Since.Format(time.RFC3339))
	}
	latestB, err := r.dst.pointerRecord(ctx, keyLatestCompleted)
	if err != nil {
		return fmt.Errorf("blobstorage: replicate: the replica: %w", err)
	}
	srcLatest, err := r.src.pointerRecord(ctx, keyLatestCompleted)
	if err != nil {
		return fmt.Errorf("blobstorage: replicate: the source: %w", err)
	}
	if srcLatest != nil && latestB != nil {
		if _, err := checkpoint.JobToSave(srcLatest.CheckpointData, latestB.CheckpointData); err != nil {
			return fmt.Errorf("blobstorage: replicate: %w", err)
		}
	}
	if _, err := r.dst.Acquire(ctx); err != nil {
		return fmt.Errorf("blobstorage: replicate: %w", err)
	}
	r.known = map[string]int64{}
	for o, err := range r.dst.bs.List(ctx, "") {
		if err != nil {
			return fmt.Errorf("blobstorage: replicate: list the replica: %w", err)
		}
		r.known[o.Key] = o.Size
	}
	if latestB != nil {
		r.last, r.job = latestB.ID, latestB.JobID
	}
	old, _ := ReadReplicationStatus(ctx, r.dst.bs)
	if old != nil && old.Checkpoint == r.last {
		r.status = *old
	}
	r.status.Source, r.status.Replicator, r.status.Job, r.status.Checkpoint = r.opts.Source, r.dst.opts.WriterName, r.job, r.last
	r.started = true
	return r.writeStatus(ctx)
}

func isReplicator(writer string) bool {
	return len(writer) > len(replicatorWriter) && writer[:len(replicatorWriter)] == replicatorWriter
}

// Run replicates until ctx ends or the Replicator is fenced (another
// replicator, or a job failing over, took the replica's writer role):
// Start, then a pass (Once) every Interval. A pass that fails for the
// stores' sake (unreachable, throttled) is logged (ReplicateOptions.Logger,
// at warning level) and retried at the next poll; one
// that finds damage (ErrCorrupt), another job or a fence ends
// Run with its error. It returns nil when ctx ends.
func (r *Replicator) Run(ctx context.Context) error {
	if err := r.Start(ctx); err != nil {
		return err
	}
	wctx, stop := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		r.watch(wctx)
	}()
	defer func() { stop(); <-watched }()
	t := time.NewTicker(r.opts.Interval)
	defer t.Stop()
	for {
		_, err := r.Once(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil && fatal(err):
			return err
		case err != nil:
			r.dst.opts.Logger.Warn("replicate: pass failed; retrying at the next poll", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// watch keeps the recovery point current while a pass is held up (the
// replica unreachable, a long copy): every Interval it reads the
// source's latest completed checkpoint and, if the replica lacks it and
// no lag is known, finds when the source completed the oldest
// checkpoint the replica lacks.
func (r *Replicator) watch(ctx context.Context) {
	t := time.NewTicker(r.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		last := r.lastCopied()
		srcID, err := r.src.PointerID(ctx, PointerLatestCompleted)
		if err != nil || srcID == "" || srcID <= last || !r.behindSince().IsZero() {
			continue // unreadable (the pass will say), caught up, or known
		}
		cands, err := r.candidates(ctx, last, srcID, true)
		if err != nil || len(cands) == 0 {
			continue
		}
		r.noteBehind(last, cands[0].completed)
	}
}

// fatal reports whether a pass's error ends Run: the replica was taken
// over, a checkpoint is damaged, or the source is another job's.
func fatal(err error) bool {
	return errors.Is(err, checkpoint.ErrFenced) || damaged(err) ||
		errors.Is(err, checkpoint.ErrOtherJob) || errors.Is(err, ErrNotReplica) ||
		errors.Is(err, ErrForeignStore) || errors.Is(err, blobstore.ErrConditionsIgnored)
}

// ReplicationPass says what one pass did.
type ReplicationPass struct {
	// Source is the source's latest completed checkpoint, Replica the
	// replica's after the pass.
	Source, Replica string
	// Copied lists the checkpoints copied, ascending.
	Copied []ReplicationStats
	// GC is the replica's collection after the copies (nil if none ran).
	GC *GCReport
}

// Once runs one pass: it reads the source's latest completed checkpoint
// and, if the replica lacks it, copies the newest Keep of the source's
// completed checkpoints newer than the replica's latest, oldest first,
// each data first, then record, then pointers; then, every GCEvery
// checkpoints copied, GC on the replica.
func (r *Replicator) Once(ctx context.Context) (ReplicationPass, error) {
	if err := r.Start(ctx); err != nil {
		return ReplicationPass{}, err
	}
	pass := ReplicationPass{Replica: r.last}
	// One HEAD of the replica's _writer a poll: a Replicator fenced by a
	// job that failed over stops even while the source is gone. A
	// replica out of reach fails the pass only once the recovery point
	// is known.
	werr := r.dst.CheckWriter(ctx)
	if errors.Is(werr, checkpoint.ErrFenced) {
		return pass, fmt.Errorf("blobstorage: replicate: %w", werr)
	}
	if werr != nil {
		werr = fmt.Errorf("blobstorage: replicate: the replica: %w", werr)
	}
	srcID, err := r.src.PointerID(ctx, PointerLatestCompleted)
	if err != nil {
		return pass, fmt.Errorf("blobstorage: replicate: the source: %w", err)
	}
	pass.Source = srcID
	if srcID == "" || srcID <= r.last {
		r.setBehind(time.Time{})
		if werr != nil {
			return pass, werr
		}
		if !r.status.BehindSince.IsZero() || r.now().Sub(r.status.Updated) >= time.Minute {
			r.status.BehindSince = time.Time{}
			err = r.writeStatus(ctx)
		}
		return pass, err
	}
	cands, err := r.candidates(ctx, r.last, srcID, false)
	if err != nil {
		return pass, err
	}
	if len(cands) == 0 {
		return pass, werr // the source's pointer moved on meanwhile: next poll
	}
	r.noteBehind(r.last, cands[0].completed)
	if werr != nil {
		return pass, werr
	}
	if since := r.behindSince(); !since.Equal(r.status.BehindSince) {
		r.status.BehindSince = since
		_ = r.writeStatus(ctx) // diagnostics: the next write repairs a failed one
	}
	keep := r.dst.opts.Keep
	for i, c := range cands {
		if len(cands)-i > keep {
			continue // retention would drop it at once
		}
		st, err := r.copyCheckpoint(ctx, c)
		pass.Copied = append(pass.Copied, st)
		r.obs.Replicated(st)
		if err != nil {
			return pass, err
		}
		pass.Replica = c.rec.ID
		r.unswept++
		next := time.Time{}
		if i+1 < len(cands) {
			next = cands[i+1].completed
		}
		r.setBehind(next)
		r.status.Checkpoint, r.status.Job, r.status.SourceCompleted = c.rec.ID, c.rec.JobID, c.completed
		r.status.Replicated, r.status.BehindSince = r.now().UTC(), next
		if err := r.writeStatus(ctx); err != nil {
			return pass, err
		}
	}
	if r.unswept < r.opts.GCEvery {
		return pass, nil
	}
	rep, err := r.dst.GC(ctx, GCOptions{})
	if err != nil {
		return pass, fmt.Errorf("blobstorage: replicate: gc of the replica: %w", err)
	}
	r.unswept = 0
	for _, d := range rep.Deletions {
		delete(r.known, d.Key)
	}
	pass.GC = &rep
	return pass, nil
}

// sourceCheckpoint is a completed checkpoint of the source to copy.
type sourceCheckpoint struct {
	rec       *Record
	raw       []byte    // the record as the source holds it
	completed time.Time // its record's modification time there
}

// candidates returns the source's completed checkpoints newer than last
// (the replica's latest), up to upto, ascending; with first, only the
// oldest. Ids of NewID's form within probeRange are read one by one; a
// wider gap is listed.
func (r *Replicator) candidates(ctx context.Context, last, upto string, first bool) ([]sourceCheckpoint, error) {
	var ids []string
	top, err1 := checkpoint.ParseID(upto)
	from, err2 := uint64(0), error(nil)
	if last != "" {
		from, err2 = checkpoint.ParseID(last)
	}
	if err1 == nil && err2 == nil && top-from <= probeRange {
		for seq := from + 1; seq <= top; seq++ {
			ids = append(ids, checkpoint.NewID(seq))
		}
	} else {
		all, err := r.src.IDs(ctx)
		if err != nil {
			return nil, fmt.Errorf("blobstorage: replicate: the source: %w", err)
		}
		for _, id := range all {
			if id > last && id <= upto {
				ids = append(ids, id)
			}
		}
	}
	var out []sourceCheckpoint
	for _, id := range ids {
		key := recordKey(id)
		raw, err := r.src.getBytes(ctx, key)
		if errors.Is(err, blobstore.ErrNotFound) {
			continue // never saved, or dropped by the source's GC
		}
		if err != nil {
			return nil, fmt.Errorf("blobstorage: replicate: the source: %w", err)
		}
		rec, err := decodeRecord(raw)
		if err != nil {
			return nil, fmt.Errorf("blobstorage: replicate: the source's record of %s: %w: %w", id, ErrCorrupt, err)
		}
		if rec.ID != id {
			return nil, fmt.Errorf("blobstorage: replicate: the source's record of %s: %w: it names id %q", id, ErrCorrupt, rec.ID)
		}
		if !rec.Completed() {
			continue
		}
		completed := rec.CompletedAt
		if completed.IsZero() {
			// A record from before CompletedAt: its modification time,
			// on the store's clock (to the second over HTTP).
			info, err := r.src.bs.Stat(ctx, key)
			if errors.Is(err, blobstore.ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("blobstorage: replicate: the source: %w", err)
			}
			completed = info.ModTime
		}
		out = append(out, sourceCheckpoint{rec: rec, raw: raw, completed: completed})
		if first {
			break
		}
	}
	return out, nil
}

// copyCheckpoint copies one checkpoint: its objects, its record, the
// pointers.
func (r *Replicator) copyCheckpoint(ctx context.Context, c sourceCheckpoint) (st ReplicationStats, err error) {
	rec := c.rec
	st = ReplicationStats{ID: rec.ID, Completed: c.completed}
	start := r.now()
	defer func() {
		st.Duration, st.Err = r.now().Sub(start), err
		if err != nil {
			err = fmt.Errorf("blobstorage: replicate %s: %w", rec.ID, err)
		}
	}()
	if r.job != "" && rec.JobID != "" && rec.JobID != r.job && !rec.StartsJob() {
		return st, &checkpoint.JobMismatch{Checkpoint: rec.ID, Job: rec.JobID, Store: r.job}
	}
	// The replica's writer owns every record it holds: its epoch stays
	// above theirs (writeRecordLocked and UpdateStatus fence a writer
	// below a record's epoch), and so does a job failing over to it.
	r.dst.mu.Lock()
	err = r.dst.checkWriterLocked(ctx)
	if err == nil && rec.Epoch >= r.dst.epoch {
		err = r.dst.raiseEpochLocked(ctx, rec.Epoch+1)
	}
	r.dst.mu.Unlock()
	if err != nil {
		return st, err
	}
	if err := r.copyObjects(ctx, rec, &st); errors.Is(err, blobstore.ErrNotFound) {
		// Dropped by the source's GC while the replica lagged (its
		// record is gone), or damage (the record names a missing object).
		if ok, xerr := r.src.bs.Exists(ctx, recordKey(rec.ID)); xerr == nil && !ok {
			return st, fmt.Errorf("%w: the source dropped it (its retention) while it was copied; a newer one is copied next", errSourceDropped)
		}
		return st, fmt.Errorf("%w: %w", ErrCorrupt, err)
	} else if err != nil {
		return st, err
	}
	if err := r.putRecord(ctx, c); err != nil {
		return st, err
	}
	r.dst.mu.Lock()
	defer r.dst.mu.Unlock()
	if err := r.dst.checkWriterLocked(ctx); err != nil {
		return st, err
	}
	if err := r.dst.advancePointersLocked(ctx, rec.ID, true); err != nil {
		return st, err
	}
	r.dst.job = &jobOfStore{latest: rec.ID, job: rec.JobID}
	r.mu.Lock()
	r.last, r.job = rec.ID, rec.JobID
	r.mu.Unlock()
	return st, nil
}

// copyObjects copies, in parallel, every object rec names that the
// replica does not hold with its recorded size.
func (r *Replicator) copyObjects(ctx context.Context, rec *Record, st *ReplicationStats) error {
	var mu sync.Mutex
	seen := map[string]bool{}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(r.dst.opts.Concurrency)
	for _, ref := range refsOf(rec) {
		f := ref.file
		if seen[f.Key] {
			continue
		}
		seen[f.Key] = true
		mu.Lock()
		size, ok := r.known[f.Key]
		mu.Unlock()
		if ok && size == f.Size {
			st.SkippedObjects++
			st.SkippedBytes += f.Size
			continue
		}
		g.Go(func() error {
			if err := r.copyObject(gctx, f); err != nil {
				return fmt.Errorf("object %q: %w", f.Key, err)
			}
			mu.Lock()
			defer mu.Unlock()
			r.known[f.Key] = f.Size
			st.Objects++
			st.Bytes += f.Size
			return nil
		})
	}
	return g.Wait()
}

// copyObject streams f from the source into the replica, checking its
// size and (for a state file) its SHA-256 as it passes: a mismatch fails
// the Put, so nothing unverified becomes visible.
func (r *Replicator) copyObject(ctx context.Context, f FileRef) error {
	rc, err := r.src.files.Get(blobstore.WithContentVerified(ctx), f.Key)
	if errors.Is(err, blobstore.ErrNotFound) {
		return fmt.Errorf("missing in the source: %w", err)
	}
	if err != nil {
		return err
	}
	defer rc.Close()
	return r.dst.bs.Put(ctx, f.Key, &copyReader{r: io.LimitReader(rc, f.Size+1), h: sha256.New(), f: f})
}

// copyReader passes an object through, hashing it, and replaces io.EOF
// with an error wrapping ErrCorrupt when the content does not
// match the record. It is a blobstore.DigestReader.
type copyReader struct {
	r io.Reader
	h hash.Hash
	n int64
	f FileRef
}

var _ blobstore.DigestReader = (*copyReader)(nil)

func (c *copyReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.h.Write(p[:n])
	c.n += int64(n)
	if err == io.EOF {
		if c.n != c.f.Size {
			return n, fmt.Errorf("%w: size %d, the record says %d", ErrCorrupt, c.n, c.f.Size)
		}
		if c.f.SHA256 != "" {
			if sum := hex.EncodeToString(c.h.Sum(nil)); sum != c.f.SHA256 {
				return n, fmt.Errorf("%w: sha256 %s, the record says %s", ErrCorrupt, sum, c.f.SHA256)
			}
		}
	}
	return n, err
}

// SHA256 returns the digest of what Read returned so far.
func (c *copyReader) SHA256() [sha256.Size]byte {
	var sum [sha256.Size]byte
	c.h.Sum(sum[:0])
	return sum
}

// putRecord writes the source's record bytes to the replica: created if
// absent; one already there with the same bytes is an interrupted
// copy's; another is the leftover of a writer no pointer names (its id
// is newer than the replica's latest), replaced.
func (r *Replicator) putRecord(ctx context.Context, c sourceCheckpoint) error {
	key := recordKey(c.rec.ID)
	raw, err := r.replicaRecord(c)
	if err != nil {
		return err
	}
	c.raw = raw
	_, err = r.dst.bs.PutIfAbsent(ctx, key, bytes.NewReader(c.raw))
	if !errors.Is(err, blobstore.ErrPreconditionFailed) {
		return err
	}
	old, etag, err := r.dst.readSmall(ctx, key, true)
	if err != nil {
		return err
	}
	if bytes.Equal(old, c.raw) {
		return nil
	}
	if err := r.dst.CheckWriter(ctx); err != nil {
		return err
	}
	_, err = r.dst.bs.PutIfMatch(ctx, key, etag, bytes.NewReader(c.raw))
	return err
}

// replicaRecord returns the record to write to the replica: the source's
// bytes, unless the replica's store encrypts the files under another key
// id than the record names (another key, none, or one where the source
// had none): copyObject reads them decrypted and writes them as the
// replica encrypts, so the replica's record names the replica's key id
// (Record.EncryptionKeyID), the rest of it as the source holds it.
func (r *Replicator) replicaRecord(c sourceCheckpoint) ([]byte, error) {
	want := r.dst.keyIDOf(c.rec)
	if want == c.rec.EncryptionKeyID {
		return c.raw, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(c.raw, &m); err != nil {
		return nil, fmt.Errorf("%w: record %s: %w", ErrCorrupt, c.rec.ID, err)
	}
	if want == "" {
		delete(m, "encryption_key_id")
	} else {
		m["encryption_key_id"], _ = json.Marshal(want)
	}
	return encodeJSON(m), nil
}

// writeStatus writes the replica's status by compare-and-swap on the one
// this Replicator last wrote (or read), after checking that it is still
// the writer: a fenced replicator cannot overwrite its successor's.
func (r *Replicator) writeStatus(ctx context.Context) error {
	if err := r.dst.CheckWriter(ctx); err != nil {
		return fmt.Errorf("blobstorage: replicate: %w", err)
	}
	r.status.Epoch = r.dst.Epoch()
	r.status.Updated = r.now().UTC()
	body := encodeJSON(r.status)
	for range 3 {
		var etag string
		var err error
		if r.etag == "" {
			etag, err = r.dst.bs.PutIfAbsent(ctx, keyReplication, bytes.NewReader(body))
		} else {
			etag, err = r.dst.bs.PutIfMatch(ctx, keyReplication, r.etag, bytes.NewReader(body))
		}
		if err == nil {
			r.etag = etag
			return nil
		}
		if !errors.Is(err, blobstore.ErrPreconditionFailed) {
			return fmt.Errorf("blobstorage: replicate: write %s: %w", keyReplication, err)
		}
		// Written by a replicator before us (or our own retried write):
		// take its ETag, once we know we are still the writer.
		if err := r.dst.CheckWriter(ctx); err != nil {
			return fmt.Errorf("blobstorage: replicate: %w", err)
		}
		info, err := r.dst.bs.Stat(ctx, keyReplication)
		switch {
		case errors.Is(err, blobstore.ErrNotFound):
			r.etag = ""
		case err != nil:
			return fmt.Errorf("blobstorage: replicate: write %s: %w", keyReplication, err)
		default:
			r.etag = info.ETag
		}
	}
	return fmt.Errorf("blobstorage: replicate: write %s: it keeps changing", keyReplication)
}
