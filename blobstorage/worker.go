package blobstorage

import (
	"context"
	"errors"
	"time"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
)

// ValidateWorkerID reports whether id can name a worker: 1 to 64 bytes of
// [A-Za-z0-9._-], not "." or "..". A worker id is a key segment.
func ValidateWorkerID(id string) error {
	return errors.New("blobstorage: not implemented")
}

// NewWorkerID returns slot + "-" + random hex: a fresh id for one
// incarnation of the worker that runs slot (a stable name such as
// "worker-2"). A replaced worker takes a new id, so that a zombie's keys
// never collide with its successor's. slot should be at most 47 bytes of
// [A-Za-z0-9._-].
func NewWorkerID(slot string) string {
	return slot
}

// PartStats describes one Worker.SavePart.
type PartStats struct {
	ID     string
	Epoch  uint64
	Owners int
	// UploadedFiles and UploadedBytes are the files this SavePart
	// uploaded; ReusedFiles and ReusedBytes those it referenced from
	// earlier uploads instead.
	UploadedFiles int
	UploadedBytes int64
	ReusedFiles   int
	ReusedBytes   int64
	// Requests is the number of object store requests it made.
	Requests int
	Duration time.Duration
}

// Worker saves and restores the state of the owners one process of a job
// runs, when the job spans several processes (hosts): each worker saves
// its owners' parts of a checkpoint with SavePart, and the job's writer
// (a Storage after Acquire and Assign) commits the checkpoint once every
// part is in. A Worker has no writer role: it moves no pointer and
// deletes nothing.
type Worker struct {
	id string
	s  *Storage // its loads, uploads, downloads, pins and file cache
}

// NewWorker returns a Worker with id workerID (see ValidateWorkerID and
// NewWorkerID) keeping its local state directories under localDir, on
// the same store bs as the job's Storage. It does no I/O.
func NewWorker(bs blobstore.Blobstore, localDir, workerID string, opts Options) (*Worker, error) {
	return nil, errors.New("blobstorage: not implemented")
}

// ID returns the worker's id.
func (w *Worker) ID() string { return w.id }

// StateDir returns localDir/<id>.state, as Storage.StateDir does.
func (w *Worker) StateDir(ckptID string) string { return w.s.StateDir(ckptID) }

// SavePart uploads StateDir(data.ID)/data.StateDirs[owner] for every
// owner in data.StateDirs (the owners this worker runs), then writes one
// part record per owner, create-if-absent. epoch is the job writer's
// epoch (Storage.Epoch) for this checkpoint: the writer commits only
// parts of its own epoch.
func (w *Worker) SavePart(ctx context.Context, epoch uint64, data *checkpoint.CheckpointData) (PartStats, error) {
	return PartStats{}, errors.New("blobstorage: not implemented")
}

// Restore downloads and verifies the state directories of the given
// owners of checkpoint id into StateDir(id), as Storage.Restore does for
// all of them, with a restore pin held while it runs.
func (w *Worker) Restore(ctx context.Context, id string, owners []string) error {
	return errors.New("blobstorage: not implemented")
}
