package blobstorage

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
)

// maxWorkerID bounds a worker id (a key segment).
const maxWorkerID = 64

// ValidateWorkerID reports whether id can name a worker: 1 to 64 bytes of
// [A-Za-z0-9._-], not "." or "..". A worker id is a key segment.
func ValidateWorkerID(id string) error {
	switch {
	case id == "":
		return errors.New("invalid worker id: empty")
	case len(id) > maxWorkerID:
		return fmt.Errorf("invalid worker id %q: %d bytes, over the %d-byte limit", id, len(id), maxWorkerID)
	case id == "." || id == "..":
		return fmt.Errorf("invalid worker id %q", id)
	case strings.Trim(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") != "":
		return fmt.Errorf("invalid worker id %q: only A-Z, a-z, 0-9, '.', '_' and '-' are allowed", id)
	}
	return nil
}

// NewWorkerID returns slot + "-" + 16 random hex digits: a fresh id for
// one incarnation of the worker that runs slot (a stable name such as
// "worker-2"). A replaced worker takes a new id, so that a zombie's keys
// never collide with its successor's. The result passes
// ValidateWorkerID when slot is at most 47 bytes of [A-Za-z0-9._-].
func NewWorkerID(slot string) string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return slot + "-" + hex.EncodeToString(b[:])
}

// PartStats describes one Worker.SavePart.
type PartStats struct {
	ID     string
	Epoch  uint64
	Owners int
	// UploadedFiles and UploadedBytes are the files this SavePart
	// uploaded; ReusedFiles and ReusedBytes those it referenced from
	// earlier uploads or restores instead.
	UploadedFiles int
	UploadedBytes int64
	ReusedFiles   int
	ReusedBytes   int64
	// Requests is the number of object store requests it made.
	Requests int
	Duration time.Duration
	// Err is the error SavePart returned (nil when it succeeded). It is
	// set only in what a PartObserver hears.
	Err error
}

// Worker saves and restores the state of the owners one process of a job
// runs, when the job spans several processes (hosts): each worker saves
// its owners' parts of a checkpoint with SavePart, and the job's writer
// (a Storage after Acquire and Assign) commits the checkpoint once every
// part is in. A Worker has no writer role: it moves no pointer and
// deletes nothing. Its methods are safe for concurrent use; SaveParts
// run one at a time.
type Worker struct {
	id string
	s  *Storage // its uploads, downloads, pins and file cache
	mu sync.Mutex
	// epoch is the epoch of the last SavePart (0: none yet).
	epoch uint64
}

// NewWorker returns a Worker with id workerID (see ValidateWorkerID and
// NewWorkerID) keeping its local state directories under localDir, on
// the same store bs as the job's Storage (prefixed the same way). opts
// are a Storage's: Concurrency, Grace (the worker re-checks a remembered
// upload older than Grace/2 before it reuses it), PinTTL, Classify and
// Observer (which hears of restores, and of every SavePart that got past
// its argument checks if it is a PartObserver) apply. It does no I/O.
func NewWorker(bs blobstore.Blobstore, localDir, workerID string, opts Options) (*Worker, error) {
	if err := ValidateWorkerID(workerID); err != nil {
		return nil, fmt.Errorf("blobstorage: new worker: %w", err)
	}
	if bs == nil {
		return nil, errors.New("blobstorage: new worker: nil blobstore")
	}
	return &Worker{id: workerID, s: New(bs, localDir, opts)}, nil
}

// UseRemote puts the worker in remote mode, as Storage.UseRemote does:
// its parts reference r's checkpoint objects (Part.Remote) instead of
// uploading them, and the writer's Save hands them to the checkpoint.
// Open the state with state.RemoteOptions{Store: the worker's Blobstore,
// Prefix: RemotePrefix, Generation: RemoteGeneration(epoch)}, where epoch
// is the writer's. The writer's GC keeps the objects of its own
// generation, so it keeps those the workers' open databases create.
func (w *Worker) UseRemote(r RemoteState) { w.s.UseRemote(r) }

// ID returns the worker's id.
func (w *Worker) ID() string { return w.id }

// RemoveStateDir removes the local state directory of checkpoint id, as
// Storage.RemoveStateDir does.
func (w *Worker) RemoveStateDir(id string) error { return w.s.RemoveStateDir(id) }

// StateDir returns localDir/<id>.state, as Storage.StateDir does, or ""
// for an invalid checkpoint id.
func (w *Worker) StateDir(ckptID string) string { return w.s.StateDir(ckptID) }

// SavePart uploads StateDir(data.ID)/data.StateDirs[owner] for every
// owner in data.StateDirs (the owners this worker runs), then writes one
// part record per owner, create-if-absent. epoch is the job writer's
// epoch (Storage.Epoch) for this checkpoint: the writer commits only
// parts of its own epoch, written by the worker its assignment names.
//
// Immutable files are uploaded once, under shared/ with the checkpoint,
// epoch and worker in the key, and referenced by later parts as
// Storage.Save references them; the others under the part's own keys
// (see the package documentation), which no other worker or epoch
// writes. An upload is reused by later parts of the same epoch; once the
// epoch changes (a new writer, or a barrier from a replaced one), only if
// a committed checkpoint names it — SavePart then reads the latest
// completed record once (two GETs) and forgets the others, so that
// nothing uploaded for a fenced writer is carried into a later
// checkpoint. Files restored by Restore come from a committed checkpoint
// and are reused across epochs. Only the fields ID and StateDirs of data
// are used.
//
// A part is written once: SavePart refuses, uploading nothing, an owner
// whose part for (data.ID, epoch) this worker already wrote.
func (w *Worker) SavePart(ctx context.Context, epoch uint64, data *checkpoint.CheckpointData) (st PartStats, err error) {
	if data == nil {
		return st, errors.New("blobstorage: save part: nil checkpoint data")
	}
	if err := checkpoint.ValidateID(data.ID); err != nil {
		return st, fmt.Errorf("blobstorage: save part: %w", err)
	}
	id := data.ID
	if epoch == 0 {
		return st, fmt.Errorf("blobstorage: save part %q: epoch 0: pass the writer's epoch (Storage.Epoch after Acquire)", id)
	}
	if err := checkpoint.ValidateStateDirs(data.StateDirs); err != nil {
		return st, fmt.Errorf("blobstorage: save part %q: %w", id, err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.s
	st = PartStats{ID: id, Epoch: epoch, Owners: len(data.StateDirs)}
	start, requests := time.Now(), s.requests.n.Load()
	var files []*localFile
	defer func() {
		st.UploadedFiles, st.UploadedBytes, st.ReusedFiles, st.ReusedBytes = tally(files)
		st.Duration, st.Requests = time.Since(start), int(s.requests.n.Load()-requests)
		if po, ok := s.opts.Observer.(PartObserver); ok {
			heard := st
			heard.Err = err
			po.SavedPart(heard)
		}
	}()
	if w.epoch != 0 && w.epoch != epoch {
		w.settle(ctx)
	}
	w.epoch = epoch
	owners := sortedOwners(data.StateDirs)
	// A second SavePart would overwrite the private files a written
	// part names: refuse before uploading.
	for _, owner := range owners {
		ok, err := s.bs.Exists(ctx, partKey(id, epoch, owner, w.id))
		if err != nil {
			return st, fmt.Errorf("blobstorage: save part %q: %w", id, err)
		}
		if ok {
			return st, fmt.Errorf("blobstorage: save part %q: owner %q: this worker already saved its part under epoch %d", id, owner, epoch)
		}
	}
	files, err = s.walkStateDirs(data)
	if err != nil {
		return st, fmt.Errorf("blobstorage: save part %q: %w", id, err)
	}
	remote, err := s.checkedRemoteRefs(ctx, data, files, epoch, "call Worker.UseRemote before SavePart")
	if err != nil {
		return st, fmt.Errorf("blobstorage: save part %q: %w", id, err)
	}
	err = s.uploadFiles(ctx, files, epoch, s.opts.Grace/2, func(f *localFile) string {
		if f.shared {
			return workerSharedKey(id, epoch, f.owner, w.id, f.rel)
		}
		return workerPrivateKey(id, epoch, f.owner, w.id, f.rel)
	})
	if err != nil {
		return st, fmt.Errorf("blobstorage: save part %q: %w", id, err)
	}
	byOwner := map[string][]FileRef{}
	for _, f := range files {
		byOwner[f.owner] = append(byOwner[f.owner], f.ref)
	}
	now := time.Now().UTC()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.opts.Concurrency)
	for _, owner := range owners {
		p := Part{ID: id, Epoch: epoch, Owner: owner, Worker: w.id, Dir: data.StateDirs[owner], Files: byOwner[owner], Remote: remote[owner], Written: now}
		if p.Files == nil {
			p.Files = []FileRef{} // an empty state dir is restored as one
		}
		body := encodeJSON(p)
		if err := checkPartBounds(body); err != nil {
			return st, fmt.Errorf("blobstorage: save part %q: owner %q: %w", id, owner, err)
		}
		g.Go(func() error {
			_, err := s.bs.PutIfAbsent(gctx, partKey(id, epoch, owner, w.id), bytes.NewReader(body))
			if errors.Is(err, blobstore.ErrPreconditionFailed) {
				return fmt.Errorf("owner %q: part already written (a concurrent SavePart of this worker id?): %w", owner, err)
			}
			if err != nil {
				return fmt.Errorf("owner %q: write part: %w", owner, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return st, fmt.Errorf("blobstorage: save part %q: %w", id, err)
	}
	s.rememberUploads(files, epoch, true)
	return st, nil
}

// settle keeps the remembered uploads that the latest completed
// checkpoint names and forgets the other uploads of earlier epochs (see
// SavePart). If the record cannot be read, it forgets them all: a cache
// miss costs an upload, never correctness.
func (w *Worker) settle(ctx context.Context) {
	committed := map[string]bool{}
	p, _, ok, err := w.s.readPointer(ctx, keyLatestCompleted, false)
	if err == nil && ok && p.ID != "" {
		if rec, err := w.s.readRecord(ctx, p.ID); err == nil {
			for _, files := range rec.Files {
				for _, f := range files {
					committed[f.Key] = true
				}
			}
		}
	}
	w.s.cache.settle(committed)
}

// Restore downloads and verifies the state directories of the given
// owners of checkpoint id into StateDir(id), as Storage.Restore does for
// all of them (same checks, same temporary directory renamed into place,
// same restore pin held while it runs, same reuse of what is already
// there). The checkpoint may have been saved with another assignment, or
// by one process: the owners are whatever the caller runs now (rescale).
// An owner the checkpoint does not have is an error; no owners is a no-op.
// The immutable files restored are remembered, so that the next SavePart
// references them instead of uploading.
func (w *Worker) Restore(ctx context.Context, id string, owners []string) error {
	if len(owners) == 0 {
		return nil
	}
	return w.s.restore(ctx, id, owners, false)
}
