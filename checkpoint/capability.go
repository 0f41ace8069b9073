package checkpoint

import (
	"context"

	"github.com/tidemark-io/tidemark/archive"
)

// Optional capabilities.
//
// A Storage may do more than the methods of Storage. Each extra ability is
// a named interface below. Callers find it with a type assertion on the
// Storage. blobstorage.Storage implements all of them and asserts so at
// compile time; FileStorage implements none, its state being local.

// WriterRole is implemented by a Storage with a single writer at a time.
// Acquire takes the role, fencing the previous writer, and returns its
// epoch. CheckWriter fails unless this Storage may save now; after a
// takeover its error wraps ErrFenced. Writes need the role; reads do not.
type WriterRole interface {
	Acquire(ctx context.Context) (epoch uint64, err error)
	CheckWriter(ctx context.Context) error
}

// Restorer is implemented by a Storage whose state lives elsewhere than on
// the local disk. Restore downloads the state directories of checkpoint id
// under StateDir(id). Materialize calls it.
type Restorer interface {
	Restore(ctx context.Context, id string) error
}

// ArchiveSource is implemented by a Storage that serves a checkpoint's
// files to ArchiveCheckpoint without a local copy of its state. Both
// methods return the archive entries and an OpenFunc streaming each.
// ArchiveFilesKnowing takes the digest of a remote object from known, given
// its key and size, instead of reading the object to hash it.
type ArchiveSource interface {
	ArchiveFiles(ctx context.Context, id string) ([]archive.File, archive.OpenFunc, error)
	ArchiveFilesKnowing(ctx context.Context, id string, known func(key string, size int64) (sha256 string, ok bool)) ([]archive.File, archive.OpenFunc, error)
}

// RemoteImporter is implemented by a Storage that can hold the remote
// objects of state in remote mode. SaveImported uploads objects, read with
// open, to the keys their archive paths name, then saves d recording them.
// ExtractCheckpoint calls it for an archive that carries remote objects.
type RemoteImporter interface {
	SaveImported(ctx context.Context, d *CheckpointData, objects []archive.File, open archive.OpenFunc) error
}

// StateDirRemover is implemented by a Storage whose local state
// directories are working copies of state kept elsewhere. RemoveStateDir
// removes checkpoint id's; PruneLocal removes all but keep's ("" keeps
// none), with what a crashed restore left. Neither touches the store.
type StateDirRemover interface {
	RemoveStateDir(id string) error
	PruneLocal(keep string) error
}

// BlobstoreBacked is implemented by a Storage that keeps its checkpoints
// in a Blobstore. Blobstore returns that store, where savepoints can live.
type BlobstoreBacked interface {
	Blobstore() Blobstore
}
