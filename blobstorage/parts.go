package blobstorage

import (
	"errors"
	"time"
)

// ErrPartMissing is returned (wrapped) by a Save of an assigned owner
// (see Storage.Assign) whose part is not in the store: never written, not
// yet written, written under another writer epoch, or written by a worker
// other than the one the assignment names (a replaced worker). Save then
// writes no record and moves no pointer.
var ErrPartMissing = errors.New("part missing: the assigned worker has not saved this owner under the current epoch")

// Assignment maps each owner (a key of checkpoint.CheckpointData.StateDirs)
// to the id of the worker that runs it (see ValidateWorkerID).
type Assignment map[string]string

// Part is what a worker saved of one owner of one checkpoint: the part
// record Worker.SavePart writes, create-if-absent, at a key derived from
// (ID, Epoch, Owner, Worker) (see the package documentation).
type Part struct {
	// ID is the checkpoint the part belongs to.
	ID string `json:"id"`
	// Epoch is the writer epoch the worker was given for this checkpoint.
	Epoch uint64 `json:"epoch"`
	// Owner is the owner whose state the part holds.
	Owner string `json:"owner"`
	// Worker is the id of the worker that wrote the part.
	Worker string `json:"worker"`
	// Dir is the owner's state directory, relative to StateDir(ID)
	// (checkpoint.CheckpointData.StateDirs[Owner]).
	Dir string `json:"dir"`
	// Files are the owner's files, as in Record.Files.
	Files []FileRef `json:"files"`
	// Written is when the worker wrote the part (diagnostics).
	Written time.Time `json:"written"`
}

// Assign makes the following Saves take the state of every owner in a
// from the part its assigned worker saved under this Storage's epoch (one
// GET per owner, no LIST), instead of from the local disk. Owners of the
// saved checkpoint.CheckpointData not in a are saved from the local disk
// as without Assign. An owner of a that the saved data does not list in
// StateDirs is added to the record with the directory its part names; one
// it lists must name the same directory. A nil or empty a restores the
// behaviour without Assign. An invalid owner or worker id is an error,
// and the assignment in force is left unchanged.
func (s *Storage) Assign(a Assignment) error {
	return errors.New("blobstorage: not implemented")
}
