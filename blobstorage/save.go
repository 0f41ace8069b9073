package blobstorage

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/internal/simbug"
	"github.com/tidemark-io/tidemark/internal/walk"
)

// fileIdent identifies the content of a local file without reading it: Pebble
// checkpoints hard-link unchanged tables, so the same table in successive
// checkpoints is the same inode, with the same size and mtime.
type fileIdent struct {
	dev, ino uint64
	size     int64
	mtime    int64
}

// cachedFile is where a file with a given fileIdent already lives in the
// store. verified is the writer epoch under which the key was last known
// to exist (uploaded or Stat'ed); 0 means never (seeded by Restore).
// checked is when (a Worker's cache also expires by age, see reuse).
// tentative marks a Worker's upload that no committed record is known to
// name yet (see Worker.SavePart).
type cachedFile struct {
	key       string
	size      int64
	sha256    string
	verified  uint64
	checked   time.Time
	tentative bool
}

// fileCache maps file identities to shared keys. It has its own lock
// because Restore (no writer role) seeds it.
type fileCache struct {
	mu sync.Mutex
	m  map[fileIdent]cachedFile
}

func (c *fileCache) get(id fileIdent) (cachedFile, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.m[id]
	return f, ok
}

func (c *fileCache) put(id fileIdent, f cachedFile) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[id] = f
}

// settle keeps, of the tentative entries, those whose key is in committed
// (no longer tentative) and forgets the others.
func (c *fileCache) settle(committed map[string]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, f := range c.m {
		switch {
		case !f.tentative:
		case committed[f.key]:
			f.tentative = false
			c.m[id] = f
		default:
			delete(c.m, id)
		}
	}
}

// keepReferenced forgets every identity whose key rec does not reference:
// a later Save then reuses only files of the last record written, which
// any GC keeps while its writer is live (see planGC).
func (c *fileCache) keepReferenced(rec *Record) {
	keys := map[string]bool{}
	for _, files := range rec.Files {
		for _, f := range files {
			keys[f.Key] = true
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, f := range c.m {
		if !keys[f.key] {
			delete(c.m, id)
		}
	}
}

// dropKeys forgets every identity whose content lives at a key in keys
// (GC deleted them).
func (c *fileCache) dropKeys(keys map[string]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, f := range c.m {
		if keys[f.key] {
			delete(c.m, id)
		}
	}
}

// fileIdentOf returns the fileIdent of fi, or false where the platform gives no
// inode (then nothing is cached and every file is uploaded).
func fileIdentOf(fi fs.FileInfo) (fileIdent, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileIdent{}, false
	}
	return fileIdent{dev: uint64(st.Dev), ino: uint64(st.Ino), size: fi.Size(), mtime: fi.ModTime().UnixNano()}, true //nolint:unconvert // Dev is uint32 on some platforms
}

// localFile is one file of a state directory to save.
type localFile struct {
	owner    string
	rel      string // slash-separated, relative to the owner's state dir
	abs      string
	info     fs.FileInfo
	shared   bool
	ref      FileRef // filled by Save
	uploaded bool
}

// Save uploads the state directories of data (StateDir(data.ID)/<rel> for
// every owner in data.StateDirs) and writes the record, then moves
// _latest and, for a completed checkpoint, _latest-completed forward.
//
// Immutable files already in the store (same file identity as one saved or
// restored before) are referenced, not uploaded; the others are uploaded
// in parallel, each hashed in the same pass. The record is written only
// after every file is durable in the store, and a pointer moves only
// after the record is: a Save that fails anywhere leaves the previous
// checkpoints untouched and at worst objects GC removes after the grace
// period.
//
// data.ID must be newer than the checkpoint _latest names, except that the
// writer that saved an id may save it again (prepared, then completed).
// Save needs the writer role (Acquire).
func (s *Storage) Save(ctx context.Context, data *checkpoint.CheckpointData) (err error) {
	if err := checkpoint.ValidateRecord(data); err != nil {
		return fmt.Errorf("blobstorage: save: %w", err)
	}
	id := data.ID
	s.mu.Lock()
	defer s.mu.Unlock()
	st := SaveStats{ID: id, Completed: data.Completed()}
	start, requests := time.Now(), s.requests.n.Load()
	var files []*localFile
	var remote map[string][]RemoteRef
	defer func() {
		st.UploadedFiles, st.UploadedBytes, st.ReusedFiles, st.ReusedBytes = tally(files)
		st.Duration, st.Requests, st.Err = time.Since(start), int(s.requests.n.Load()-requests), err
		st.RemoteObjects, st.RemoteBytes = countRemote(remote)
		s.opts.Observer.Saved(st)
	}()
	if err := s.checkWriterLocked(ctx); err != nil {
		return fmt.Errorf("blobstorage: save %q: %w", id, err)
	}
	_, resave := s.recordETag[id]
	latestID, latestRead := "", false
	if !resave {
		latest, _, _, err := s.readPointer(ctx, keyLatest, false)
		if err != nil {
			return fmt.Errorf("blobstorage: save %q: %w", id, err)
		}
		if latest.ID != "" && latest.ID >= id {
			return fmt.Errorf("blobstorage: save %q: not newer than the latest checkpoint %q (ids sort in creation order)", id, latest.ID)
		}
		latestID, latestRead = latest.ID, true
	}
	job, err := s.jobToSaveLocked(ctx, data, latestID, latestRead)
	if err != nil {
		return fmt.Errorf("blobstorage: save %q: %w", id, err)
	}
	if data.JobID != job {
		stamped := *data
		stamped.JobID = job
		data = &stamped
	}

	// The owners assigned to workers come from their parts (parts.go),
	// the others from the local disk.
	rec, local, err := s.assembleLocked(ctx, data)
	if err != nil {
		return fmt.Errorf("blobstorage: save %q: %w", id, err)
	}
	files, err = s.walkStateDirs(local)
	if err != nil {
		return fmt.Errorf("blobstorage: save %q: %w", id, err)
	}
	if remote, err = s.remoteRefsLocked(ctx, local, files); err != nil {
		return fmt.Errorf("blobstorage: save %q: %w", id, err)
	}
	// The workers' parts brought the remote objects of their owners.
	for owner, refs := range rec.Remote {
		if remote == nil {
			remote = map[string][]RemoteRef{}
		}
		remote[owner] = refs
	}
	if err := validateRemote(rec.CheckpointData, remote); err != nil {
		return fmt.Errorf("blobstorage: save %q: %w", id, err)
	}
	rec.Remote = remote
	epoch := s.epoch
	err = s.uploadFiles(ctx, files, epoch, 0, func(f *localFile) string {
		if f.shared {
			return sharedKey(id, epoch, f.owner, f.rel)
		}
		return privateKey(id, epoch, f.owner, f.rel)
	})
	if err != nil {
		return fmt.Errorf("blobstorage: save %q: %w", id, err)
	}
	for owner := range local.StateDirs {
		rec.Files[owner] = []FileRef{} // an empty state dir is restored as one
	}
	for _, f := range files {
		rec.Files[f.owner] = append(rec.Files[f.owner], f.ref)
	}
	if simbug.On(simbug.PointerBeforeRecord) {
		if err := s.advancePointersLocked(ctx, id, data.Completed()); err != nil {
			return fmt.Errorf("blobstorage: save %q: %w", id, err)
		}
	}
	if rec.Completed() {
		rec.CompletedAt = time.Now().UTC()
	}
	rec.EncryptionKeyID = s.keyIDOf(rec)
	if err := s.writeRecordLocked(ctx, rec); err != nil {
		return fmt.Errorf("blobstorage: save %q: %w", id, err)
	}
	// Cache the uploaded immutable files only now: a failed Save may have
	// uploaded some, but they are not worth trusting across a failure.
	s.rememberUploads(files, s.epoch, false)
	s.cache.keepReferenced(rec)
	s.noteCommittedLocked(rec)
	if err := s.advancePointersLocked(ctx, id, data.Completed()); err != nil {
		return fmt.Errorf("blobstorage: save %q: %w", id, err)
	}
	s.job = &jobOfStore{latest: id, job: job}
	return nil
}

// jobOfStore is the job of the store's latest checkpoint, as this writer
// last read or wrote it; gen is the writer generation (Storage.gen) of a
// hint a Load left.
type jobOfStore struct {
	latest string // "": the store holds no checkpoint
	job    string
	gen    uint64
}

// jobToSaveLocked returns the job id the record of data is saved under
// (checkpoint.JobToSave). The job of the latest checkpoint is read once
// per epoch, and not at all after a Load of it under this epoch (the
// runtime's recovery loads it before the first Save): latestID, when
// latestRead, is the id _latest named a moment ago.
func (s *Storage) jobToSaveLocked(ctx context.Context, data *checkpoint.CheckpointData, latestID string, latestRead bool) (string, error) {
	if h := s.jobHint.Load(); s.job == nil && latestRead && h != nil && h.gen == s.gen.Load() && h.latest == latestID {
		s.job = &jobOfStore{latest: h.latest, job: h.job}
	}
	if s.job == nil && latestRead {
		s.job = &jobOfStore{}
		if latestID != "" {
			rec, err := s.readRecord(ctx, latestID)
			if err != nil {
				s.job = nil
				return "", fmt.Errorf("read the latest checkpoint %s: %w", latestID, err)
			}
			s.job = &jobOfStore{latest: rec.ID, job: rec.JobID}
		}
	}
	if s.job == nil {
		rec, err := s.pointerRecord(ctx, keyLatest)
		if err != nil {
			return "", err
		}
		s.job = &jobOfStore{}
		if rec != nil {
			s.job = &jobOfStore{latest: rec.ID, job: rec.JobID}
		}
	}
	var latest *checkpoint.CheckpointData
	if s.job.latest != "" {
		latest = &checkpoint.CheckpointData{ID: s.job.latest, JobID: s.job.job}
	}
	return checkpoint.JobToSave(data, latest)
}

// writeRecordLocked writes rec: create-if-absent for an id this writer
// has not written, compare-and-swap against our own last write otherwise.
// An existing record we did not write is replaced only if an older epoch
// wrote it (a fenced writer's leftover, which no pointer names since the
// id is newer than _latest); a newer epoch's record means we are fenced.
func (s *Storage) writeRecordLocked(ctx context.Context, rec *Record) error {
	key := recordKey(rec.ID)
	body := encodeJSON(rec)
	// Write nothing that a read would refuse: the store would be stuck.
	if err := checkRecordBounds(body); err != nil {
		return err
	}
	if etag, ok := s.recordETag[rec.ID]; ok {
		newETag, err := s.bs.PutIfMatch(ctx, key, etag, bytes.NewReader(body))
		if errors.Is(err, blobstore.ErrPreconditionFailed) {
			if ferr := s.checkWriterLocked(ctx); ferr != nil {
				return ferr
			}
			return fmt.Errorf("record changed by someone else: %w", err)
		}
		if err != nil {
			return err
		}
		s.recordETag[rec.ID] = newETag
		return nil
	}
	newETag, err := s.bs.PutIfAbsent(ctx, key, bytes.NewReader(body))
	if errors.Is(err, blobstore.ErrPreconditionFailed) {
		old, oldETag, rerr := s.readRecordETag(ctx, rec.ID)
		if rerr != nil {
			return fmt.Errorf("checkpoint %q already exists: %w", rec.ID, rerr)
		}
		if old.Epoch > s.epoch {
			s.markFencedLocked()
			return fmt.Errorf("checkpoint %q already exists, written by epoch %d > ours %d: %w", rec.ID, old.Epoch, s.epoch, checkpoint.ErrFenced)
		}
		newETag, err = s.bs.PutIfMatch(ctx, key, oldETag, bytes.NewReader(body))
		if errors.Is(err, blobstore.ErrPreconditionFailed) {
			return fmt.Errorf("checkpoint %q already exists (another writer is using this id): %w", rec.ID, err)
		}
	}
	if err != nil {
		return err
	}
	s.recordETag[rec.ID] = newETag
	return nil
}

// walkStateDirs lists the regular files of every state directory of data,
// sorted by owner and path. It refuses symbolic links and special files:
// they could not be restored as they were.
func (s *Storage) walkStateDirs(data *checkpoint.CheckpointData) ([]*localFile, error) {
	var files []*localFile
	owners := make([]string, 0, len(data.StateDirs))
	for o := range data.StateDirs {
		owners = append(owners, o)
	}
	sort.Strings(owners)
	for _, owner := range owners {
		root := filepath.Join(s.StateDir(data.ID), filepath.FromSlash(data.StateDirs[owner]))
		walked, err := walk.RegularFiles(root)
		if err != nil {
			return nil, fmt.Errorf("state dir of owner %q: %w", owner, err)
		}
		for _, f := range walked {
			if err := checkpoint.ValidatePath(f.Rel); err != nil {
				// A name no store, OS or archive would carry the same.
				return nil, fmt.Errorf("owner %q: %w", owner, err)
			}
			files = append(files, &localFile{
				owner: owner, rel: f.Rel, abs: f.Path, info: f.Info, shared: s.opts.Classify(f.Rel),
			})
		}
	}
	return files, nil
}

// uploadFiles fills in every file's FileRef: a cached immutable file is
// referenced where it is (after checking once per epoch, and once per
// maxAge if not 0, that it still exists), the others are uploaded with
// bounded parallelism under the key keyOf names. Storage.Save and
// Worker.SavePart both upload through it.
func (s *Storage) uploadFiles(ctx context.Context, files []*localFile, epoch uint64, maxAge time.Duration, keyOf func(*localFile) string) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.opts.Concurrency)
	for _, f := range files {
		g.Go(func() error {
			if f.shared {
				if ref, ok, err := s.reuse(gctx, f, epoch, maxAge); err != nil {
					return err
				} else if ok {
					f.ref = ref
					return nil
				}
			}
			key := keyOf(f)
			if err := blobstore.ValidateKey(key); err != nil {
				return fmt.Errorf("owner %q file %s: %w", f.owner, f.rel, err)
			}
			ref, info, err := s.uploadFile(gctx, key, f.abs)
			if err != nil {
				return fmt.Errorf("owner %q file %s: %w", f.owner, f.rel, err)
			}
			ref.Path = f.rel
			f.ref, f.info, f.uploaded = ref, info, true
			return nil
		})
	}
	return g.Wait()
}

// reuse returns the FileRef of f's content already in the store, if the
// cache knows it. A key not yet verified under epoch is Stat'ed once: it
// may come from a Restore, and a previous writer's GC may have deleted it
// since. After our Acquire a Storage's cache holds only what the last
// record it wrote references (keepReferenced), which no GC deletes while
// we are the writer (see planGC); our own GC also drops what it deletes
// from the cache. A Worker's cache does not hear of the writer's
// GC: it passes a maxAge, after which a key is Stat'ed again.
func (s *Storage) reuse(ctx context.Context, f *localFile, epoch uint64, maxAge time.Duration) (FileRef, bool, error) {
	fid, ok := fileIdentOf(f.info)
	if !ok {
		return FileRef{}, false, nil
	}
	c, ok := s.cache.get(fid)
	if !ok {
		return FileRef{}, false, nil
	}
	if c.verified != epoch || (maxAge > 0 && time.Since(c.checked) >= maxAge) {
		info, err := s.bs.Stat(ctx, c.key)
		if errors.Is(err, blobstore.ErrNotFound) || (err == nil && info.Size != c.size) {
			return FileRef{}, false, nil
		}
		if err != nil {
			return FileRef{}, false, fmt.Errorf("owner %q file %s: %w", f.owner, f.rel, err)
		}
		c.verified, c.checked = epoch, time.Now()
		s.cache.put(fid, c)
	}
	return FileRef{Path: f.rel, Size: c.size, SHA256: c.sha256, Key: c.key}, true, nil
}

// rememberUploads caches the immutable files of files that were uploaded,
// as verified under epoch (tentative: see cachedFile).
func (s *Storage) rememberUploads(files []*localFile, epoch uint64, tentative bool) {
	now := time.Now()
	for _, f := range files {
		if f.shared && f.uploaded {
			if fid, ok := fileIdentOf(f.info); ok {
				s.cache.put(fid, cachedFile{key: f.ref.Key, size: f.ref.Size, sha256: f.ref.SHA256, verified: epoch, checked: now, tentative: tentative})
			}
		}
	}
}

// uploadFile puts the file at abs under key, hashing it in the same pass,
// and returns its reference and the stat of the open file. The bytes read
// must match the size the file had when opened: a file that changes while
// it is uploaded would be recorded with the wrong identity.
func (s *Storage) uploadFile(ctx context.Context, key, abs string) (FileRef, fs.FileInfo, error) {
	fh, err := os.Open(abs)
	if err != nil {
		return FileRef{}, nil, err
	}
	defer fh.Close()
	info, err := fh.Stat()
	if err != nil {
		return FileRef{}, nil, err
	}
	cr := newHashingReader(fh)
	if err := s.bs.Put(ctx, key, cr); err != nil {
		return FileRef{}, nil, err
	}
	if cr.n != info.Size() {
		return FileRef{}, nil, fmt.Errorf("changed while uploading: read %d bytes, size was %d", cr.n, info.Size())
	}
	sum := cr.SHA256()
	return FileRef{Size: cr.n, SHA256: hex.EncodeToString(sum[:]), Key: key}, info, nil
}

// sortedOwners returns the keys of m in order.
func sortedOwners[V any](m map[string]V) []string {
	owners := make([]string, 0, len(m))
	for o := range m {
		owners = append(owners, o)
	}
	slices.Sort(owners)
	return owners
}

// age returns how long before now t is.
func age(now, t time.Time) time.Duration { return now.Sub(t) }

// tally counts the files a save uploaded and those it referenced from
// earlier uploads, with their bytes.
func tally(files []*localFile) (uploaded int, uploadedBytes int64, reused int, reusedBytes int64) {
	for _, f := range files {
		switch {
		case f.uploaded:
			uploaded++
			uploadedBytes += f.ref.Size
		case f.ref.Key != "":
			reused++
			reusedBytes += f.ref.Size
		}
	}
	return uploaded, uploadedBytes, reused, reusedBytes
}
