package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Status tracks a checkpoint through the two-phase commit protocol.
//
//	prepared:  offsets + state persisted, sink transaction flushed but
//	           NOT yet committed. The commit decision is logged.
//	completed: sink transaction committed; safe to restore from.
//
// Checkpoints written without an explicit status (legacy, or the
// uncoordinated at-least-once path) are treated as completed.
type Status string

const (
	// StatusPrepared marks a checkpoint whose state and offsets are durable
	// but whose sink transaction is not known to be committed.
	StatusPrepared Status = "prepared"
	// StatusCompleted marks a checkpoint whose sink transaction committed:
	// it is safe to restore from.
	StatusCompleted Status = "completed"
)

// Valid reports whether s is a status a record may carry (the empty status
// is the legacy spelling of completed).
func (s Status) Valid() bool {
	return s == "" || s == StatusPrepared || s == StatusCompleted
}

// ValidateStatusUpdate validates the arguments of Storage.UpdateStatus
// before any I/O, with the errors every implementation returns for them.
func ValidateStatusUpdate(id string, status Status) error {
	if err := ValidateID(id); err != nil {
		return fmt.Errorf("checkpoint: update status %q: %w", id, err)
	}
	if !status.Valid() {
		return fmt.Errorf("checkpoint: update status %q: unknown status %q", id, status)
	}
	return nil
}

// RestoredFromKey is the key in CheckpointData.Source under which
// ExtractCheckpoint (and so RestoreSavepoint) records the id a checkpoint
// had before a rollback gave it a new one (see ExtractCheckpoint).
const RestoredFromKey = "tidemark.restored_from"

// SourceOffsetsKey is the key in CheckpointData.Source under which the
// Coordinator stores the barrier-aligned source offsets it received in
// OnBarrierInjected.
const SourceOffsetsKey = "offsets"

// CheckpointData holds the complete state of a pipeline at a point in time.
// It includes the state of each stateful operator (by index) and the source
// offset (if applicable). StateDirs maps owner IDs to paths, relative to
// Storage.StateDir(ID), of native (hard-linked) state directories, used by
// Pebble-backed state for O(1)-delta checkpoints.
//
// The JSON field names are those of the reference engine, so records
// written by either can be read by the other. Records are decoded
// leniently (unknown fields are ignored), which leaves room for fields a
// later format adds, such as per-file digests for object-store checkpoints.
type CheckpointData struct {
	ID        string            `json:"id"`
	Timestamp time.Time         `json:"timestamp"`
	Operators map[string][]byte `json:"operators"`            // operator index -> state bytes
	Source    map[string][]byte `json:"source"`               // source-specific offset data
	Status    Status            `json:"status,omitempty"`     // empty means completed
	TxnID     string            `json:"txn_id,omitempty"`     // sink transactional id (diagnostics)
	StateDirs map[string]string `json:"state_dirs,omitempty"` // ownerID -> path relative to StateDir(ID)
	// JobID names the job whose lineage the checkpoint belongs to (see
	// NewJobID and JobToSave); empty in records written before job ids.
	JobID string `json:"job_id,omitempty"`
}

// Completed reports whether this checkpoint is safe to restore from: its
// status is completed, or empty (legacy records and the uncoordinated
// at-least-once path).
func (d *CheckpointData) Completed() bool {
	return d.Status == "" || d.Status == StatusCompleted
}

// Offsets returns the source offsets the Coordinator recorded for this
// checkpoint (Source[SourceOffsetsKey]), or nil.
func (d *CheckpointData) Offsets() []byte {
	return d.Source[SourceOffsetsKey]
}

// Sentinel errors. They are wrapped with the operation and the checkpoint
// id, so callers test them with errors.Is.
var (
	// ErrNotFound is returned (wrapped) by LoadSpecific and UpdateStatus
	// for a checkpoint id that has no record. It is distinct from
	// ErrBlobNotFound, which is about a blobstore key.
	ErrNotFound = errors.New("checkpoint not found")
	// ErrInvalidID is returned (wrapped) for a checkpoint id that cannot
	// name a record: see ValidateID.
	ErrInvalidID = errors.New("checkpoint: invalid id")
	// ErrFenced is returned (wrapped) by every write of a Storage with a
	// writer role (blobstorage.Storage) whose writer was replaced: another
	// process took the role after it, and this one is a zombie. It stays
	// fenced. The Coordinator does not abort a sink transaction after it:
	// the new writer owns those decisions.
	ErrFenced = errors.New("checkpoint: fenced: another writer took over")
)

// marshalRecord encodes a record the way every Storage writes it.
func marshalRecord(d *CheckpointData) ([]byte, error) {
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("checkpoint: encode %q: %w", d.ID, err)
	}
	return append(b, '\n'), nil
}

// ValidateRecord checks what every Storage requires of a record before it
// saves one and after it reads one: a valid id (ValidateID) that NextID can
// follow (so that a later checkpoint can always become the latest), a
// known status, valid state directories (ValidateStateDirs) and a valid
// job id if any (ValidateJobID).
func ValidateRecord(d *CheckpointData) error {
	if d == nil {
		return errors.New("nil record")
	}
	if err := ValidateID(d.ID); err != nil {
		return err
	}
	if _, err := NextID(d.ID); err != nil {
		// An id no NextID can follow (not of NewID's form, or the last
		// one) would stop every later checkpoint from becoming the
		// latest: the pointers never move backwards.
		return fmt.Errorf("record %q: no later checkpoint id could follow it: %w", d.ID, err)
	}
	if !d.Status.Valid() {
		return fmt.Errorf("record %q: unknown status %q", d.ID, d.Status)
	}
	if err := ValidateStateDirs(d.StateDirs); err != nil {
		return fmt.Errorf("record %q: %w", d.ID, err)
	}
	if d.JobID != "" {
		if err := ValidateJobID(d.JobID); err != nil {
			return fmt.Errorf("record %q: %w", d.ID, err)
		}
	}
	return nil
}

// DecodeRecord decodes a record as every Storage writes it and checks that
// it names a valid id, a known status and valid state directories (see
// ValidateStateDirs). The record limits (MaxRecordBytes and the others)
// are checked first, on the raw bytes: a refusal wraps ErrRecordTooLarge.
func DecodeRecord(b []byte) (*CheckpointData, error) {
	if err := CheckRecordBounds(b); err != nil {
		return nil, fmt.Errorf("checkpoint: decode record: %w", err)
	}
	var d CheckpointData
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("checkpoint: decode record: %w", err)
	}
	if err := ValidateRecord(&d); err != nil {
		return nil, fmt.Errorf("checkpoint: decode record: %w", err)
	}
	return &d, nil
}
