package checkpoint

import "context"

// Storage is the interface for persisting checkpoint data. FileStorage
// keeps checkpoints on a local filesystem; an object-store implementation
// keeps them in a blobstore.Blobstore. Every method that does I/O takes a
// context first.
//
// Implementations are safe for concurrent use by one process. The ids a
// Storage holds sort in creation order (see NewID): the latest-completed
// checkpoint is the completed one with the greatest id, and it never moves
// backwards.
type Storage interface {
	// Save writes checkpoint data to persistent storage, together with
	// the contents of StateDir(data.ID) for implementations that keep
	// state elsewhere than on the local disk.
	// The implementation must be atomic — a partial write must not
	// corrupt a previous checkpoint — and durable (fsync) before
	// returning, because the coordinator treats a successful Save of a
	// prepared checkpoint as the logged commit decision.
	Save(ctx context.Context, data *CheckpointData) error

	// Load reads the most recent checkpoint regardless of status.
	// Returns nil with no error if no checkpoint exists.
	Load(ctx context.Context) (*CheckpointData, error)

	// LoadLatestCompleted reads the most recent checkpoint whose
	// status is completed. Returns nil with no error if none exists.
	LoadLatestCompleted(ctx context.Context) (*CheckpointData, error)

	// LoadSpecific reads the checkpoint with the given id. A missing
	// checkpoint is an error wrapping ErrNotFound.
	LoadSpecific(ctx context.Context, id string) (*CheckpointData, error)

	// UpdateStatus rewrites the status of an existing checkpoint
	// (prepared → completed promotion, after the sink commit or during
	// recovery when the sink proves the commit), as atomically and
	// durably as Save. A missing checkpoint is an error wrapping
	// ErrNotFound.
	UpdateStatus(ctx context.Context, id string, status Status) error

	// StateDir returns the local root directory for native state
	// snapshots (e.g. Pebble hard-links) associated with a checkpoint;
	// the per-owner directories named in CheckpointData.StateDirs live
	// under it. It does no I/O. The state directories of all ids are
	// siblings in one parent directory (ExtractCheckpoint stages an
	// archive there so that moving it into place is a rename).
	StateDir(id string) string
}
