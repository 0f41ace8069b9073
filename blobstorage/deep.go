package blobstorage

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/savepoint"
)

// Deep verification reads every object a checkpoint references and, unlike
// Verify, goes on after the first damage, so the report names every
// missing or corrupt key. State files are checked against the record's
// size and SHA-256. Remote objects have no digest in the record: they are
// read whole, which makes the store check its own checksum (s3store's
// CRC32C, blobstore.ErrChecksum), and their size is compared.

// Damage is one object found missing or corrupt.
type Damage struct {
	// Key is the object's key in the store.
	Key string `json:"key"`
	// Missing is set when the store has no object under Key.
	Missing bool `json:"missing"`
	// Reason says what is wrong, in a few words.
	Reason string `json:"reason"`
	// Owner and Path name the state file the object holds; Path is empty
	// for a remote object, Owner too for a savepoint's archive.
	Owner string `json:"owner,omitempty"`
	Path  string `json:"path,omitempty"`
	// Checkpoints are the checkpoints that reference the object (Scrub).
	Checkpoints []string `json:"checkpoints,omitempty"`
}

// DeepReport is what VerifyDeep found in one checkpoint.
type DeepReport struct {
	// ID is the checkpoint.
	ID string `json:"id"`
	// Objects and Bytes count what the record references.
	Objects int   `json:"objects"`
	Bytes   int64 `json:"bytes"`
	// Damaged lists every missing or corrupt object, by key.
	Damaged []Damage `json:"damaged,omitempty"`
}

// objectRef is one object a record references: a state file (sha256
// set) or a remote object.
type objectRef struct {
	owner string
	file  FileRef // Path and SHA256 empty for a remote object
}

// refsOf lists the objects rec references.
func refsOf(rec *Record) []objectRef {
	var refs []objectRef
	for _, owner := range sortedOwners(rec.Files) {
		for _, f := range rec.Files[owner] {
			refs = append(refs, objectRef{owner: owner, file: f})
		}
	}
	for _, owner := range sortedOwners(rec.Remote) {
		for _, r := range rec.Remote[owner] {
			refs = append(refs, objectRef{owner: owner, file: FileRef{Key: r.Key, Size: r.Size}})
		}
	}
	return refs
}

// VerifyDeep reads every object of checkpoint id and reports each one
// missing or corrupt. The error is for what is no verdict: the record
// cannot be read (ErrCorrupt if it is damaged,
// checkpoint.ErrNotFound if absent), the store fails, ctx ends.
func (s *Storage) VerifyDeep(ctx context.Context, id string) (*DeepReport, error) {
	rec, err := s.LoadRecord(ctx, id)
	if err != nil {
		return nil, err
	}
	refs := refsOf(rec)
	rep := &DeepReport{ID: id, Objects: len(refs)}
	for _, r := range refs {
		rep.Bytes += r.file.Size
	}
	damage, err := s.checkObjects(ctx, refs)
	if err != nil {
		return nil, fmt.Errorf("blobstorage: verify %q: %w", id, err)
	}
	rep.Damaged = damage
	return rep, nil
}

// checkObjects reads each of refs once (a key referenced twice is read
// once), in parallel, and returns the damage found, sorted by key.
func (s *Storage) checkObjects(ctx context.Context, refs []objectRef) ([]Damage, error) {
	var (
		mu     sync.Mutex
		damage []Damage
		seen   = map[string]bool{}
	)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.opts.Concurrency)
	for _, r := range refs {
		if seen[r.file.Key] {
			continue
		}
		seen[r.file.Key] = true
		g.Go(func() error {
			d, err := s.checkObject(gctx, r)
			if err != nil {
				return err
			}
			if d != nil {
				mu.Lock()
				damage = append(damage, *d)
				mu.Unlock()
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	slices.SortFunc(damage, func(a, b Damage) int { return strings.Compare(a.Key, b.Key) })
	return damage, nil
}

// checkObject reads one object: nil if it is intact, its Damage if not,
// an error if the store could not tell.
func (s *Storage) checkObject(ctx context.Context, r objectRef) (*Damage, error) {
	var err error
	if r.file.SHA256 != "" {
		err = s.readVerified(ctx, r.file, io.Discard)
	} else {
		err = s.readRemote(ctx, r.file)
	}
	if err == nil {
		return nil, nil
	}
	d := &Damage{Key: r.file.Key, Owner: r.owner, Path: r.file.Path}
	switch {
	case errors.Is(err, blobstore.ErrNotFound):
		d.Missing, d.Reason = true, "missing"
	case damaged(err), errors.Is(err, blobstore.ErrChecksum):
		d.Reason = damageReason(err)
	default:
		return nil, fmt.Errorf("read %q: %w", r.file.Key, err)
	}
	return d, nil
}

// readRemote reads a remote object whole (the store checks its own
// checksum on the way) and compares its size to the record's.
func (s *Storage) readRemote(ctx context.Context, f FileRef) error {
	rc, err := s.files.Get(ctx, f.Key)
	if err != nil {
		return err
	}
	defer rc.Close()
	n, err := io.Copy(io.Discard, io.LimitReader(rc, f.Size+1))
	if err != nil {
		return err
	}
	if n != f.Size {
		return fmt.Errorf("%w: size %d, record says %d", ErrCorrupt, n, f.Size)
	}
	return nil
}

// ScrubReport is what Scrub found in a whole store.
type ScrubReport struct {
	// Checkpoints is one report per record, by id.
	Checkpoints []DeepReport `json:"checkpoints"`
	// Records lists the records that could not be read (damaged JSON):
	// what they reference is unknown, so no key counts as an orphan.
	Records []Damage `json:"unreadable_records,omitempty"`
	// Savepoints is one entry per savepoint archive.
	Savepoints []SavepointCheck `json:"savepoints"`
	// Damaged lists each missing or corrupt object once, with the
	// checkpoints that reference it.
	Damaged []Damage `json:"damaged,omitempty"`
	// Objects and Bytes count the distinct objects read.
	Objects int   `json:"objects"`
	Bytes   int64 `json:"bytes"`
	// Orphans are the keys of Tidemark's layout (private, shared and
	// remote files, parts) that no record references and no pin protects.
	// A live job's uploads in progress and its remote state not yet in a
	// checkpoint are among them until its next checkpoint; GC removes the
	// rest after its grace period.
	Orphans []blobstore.ObjectInfo `json:"orphans,omitempty"`
}

// SavepointCheck is the verdict on one savepoint archive.
type SavepointCheck struct {
	Label string `json:"label"`
	Key   string `json:"key"`
	Files int    `json:"files"`
	Bytes int64  `json:"bytes"`
	// Damage is set when the archive is missing or corrupt.
	Damage *Damage `json:"damage,omitempty"`
}

// OK reports whether the scrub found nothing missing or corrupt.
func (r *ScrubReport) OK() bool {
	if len(r.Damaged) > 0 || len(r.Records) > 0 {
		return false
	}
	for _, sp := range r.Savepoints {
		if sp.Damage != nil {
			return false
		}
	}
	return true
}

// Scrub checks a whole store and writes nothing but a savepoint lock
// while it reads (savepoint.Scrub): it reads every object every record
// references (each once, however many records share it), reads and
// checks every savepoint, and lists the orphans. The error is for what
// is no verdict (the store fails, ctx ends).
func (s *Storage) Scrub(ctx context.Context) (*ScrubReport, error) {
	var all []blobstore.ObjectInfo
	for o, err := range s.bs.List(ctx, "") {
		if err != nil {
			return nil, fmt.Errorf("blobstorage: scrub: list: %w", err)
		}
		all = append(all, o)
	}
	rep := &ScrubReport{}
	referenced := map[string][]string{} // key → ids of the records naming it
	var refs []objectRef
	recorded := map[string]bool{} // checkpoints with a readable record
	pinned := map[string]bool{}
	for _, o := range all {
		if id, ok := pinOfKey(o.Key); ok {
			pinned[id] = true
		}
		id, isRecord, ok := checkpointOfKey(o.Key)
		if !ok || !isRecord {
			continue
		}
		rec, err := s.readRecord(ctx, id)
		if damaged(err) {
			rep.Records = append(rep.Records, Damage{Key: o.Key, Reason: damageReason(err)})
			continue
		}
		if errors.Is(err, checkpoint.ErrNotFound) {
			continue // deleted since the listing (GC)
		}
		if err != nil {
			return nil, fmt.Errorf("blobstorage: scrub: record %s: %w", id, err)
		}
		recorded[id] = true
		cp := DeepReport{ID: id}
		for _, r := range refsOf(rec) {
			cp.Objects++
			cp.Bytes += r.file.Size
			if _, ok := referenced[r.file.Key]; !ok {
				refs = append(refs, r)
				rep.Objects++
				rep.Bytes += r.file.Size
			}
			referenced[r.file.Key] = append(referenced[r.file.Key], id)
		}
		rep.Checkpoints = append(rep.Checkpoints, cp)
	}
	damage, err := s.checkObjects(ctx, refs)
	if err != nil {
		return nil, fmt.Errorf("blobstorage: scrub: %w", err)
	}
	byID := map[string]*DeepReport{}
	for i := range rep.Checkpoints {
		byID[rep.Checkpoints[i].ID] = &rep.Checkpoints[i]
	}
	for _, d := range damage {
		d.Checkpoints = referenced[d.Key]
		rep.Damaged = append(rep.Damaged, d)
		for _, id := range d.Checkpoints {
			byID[id].Damaged = append(byID[id].Damaged, d)
		}
	}
	if rep.Savepoints, err = s.scrubSavepoints(ctx); err != nil {
		return nil, err
	}
	if len(rep.Records) == 0 {
		rep.Orphans = orphans(all, referenced, recorded, pinned)
	}
	return rep, nil
}

// scrubSavepoints reads and checks every savepoint (savepoint.Scrub:
// each content object once, however many savepoints share it).
func (s *Storage) scrubSavepoints(ctx context.Context) ([]SavepointCheck, error) {
	verdicts, err := savepoint.Scrub(ctx, s.bs, savepoint.Options{Concurrency: s.opts.Concurrency})
	if err != nil {
		return nil, fmt.Errorf("blobstorage: scrub: %w", err)
	}
	checks := make([]SavepointCheck, 0, len(verdicts))
	for _, v := range verdicts {
		if checkpoint.ValidateLabel(v.Label) != nil {
			continue
		}
		c := SavepointCheck{Label: v.Label, Key: checkpoint.SavepointKey(v.Label), Files: v.Files, Bytes: v.Bytes}
		if v.Damage != nil {
			c.Damage = &Damage{Key: v.Key, Missing: v.Missing, Reason: v.Damage.Error(), Path: v.Path}
		}
		checks = append(checks, c)
	}
	return checks, nil
}

// orphans returns the keys of all that belong to checkpoints' files but
// that no record references: private files and parts of checkpoints (with
// or without a record), shared and remote files. A checkpoint a pin
// protects keeps its objects (a restore is reading them). Pointers, the
// writer, the mark, pins, records and savepoints are never orphans, and
// keys outside the layout are not Tidemark's to judge.
func orphans(all []blobstore.ObjectInfo, referenced map[string][]string, recorded, pinned map[string]bool) []blobstore.ObjectInfo {
	var out []blobstore.ObjectInfo
	for _, o := range all {
		if _, ok := referenced[o.Key]; ok {
			continue
		}
		switch KeyClass(o.Key) {
		case "shared", "remote":
		case "private", "part":
			id, _, _ := checkpointOfKey(o.Key)
			if pinned[id] || isPartKey(o.Key) && recorded[id] {
				continue // a committed checkpoint's part document
			}
		default:
			continue
		}
		out = append(out, o)
	}
	return slices.SortedFunc(slices.Values(out), func(a, b blobstore.ObjectInfo) int { return cmp.Compare(a.Key, b.Key) })
}
