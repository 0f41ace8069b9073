package blobstorage

import (
	"context"
)

// RemotePrefix is the key prefix, relative to the Storage's Blobstore,
// under which state in remote mode keeps its objects: pass it as
// state.RemoteOptions.Prefix, with RemoteOptions.Store the same Blobstore
// the Storage was given. Objects are then at
// remote/<owner>/<locator>/<name>, where the locator starts with
// RemoteGeneration(epoch) of the writer that created them.
const RemotePrefix = "remote"

// RemoteGeneration returns "e<epoch>", the generation a writer of the
// given epoch passes as state.RemoteOptions.Generation, so that GC can
// tell which writer created an object and leave a live writer's objects
// alone.
func RemoteGeneration(epoch uint64) string { return epochSegment(epoch) }

// RemoteRef is one object of remote-mode state that a checkpoint
// references without uploading it (an ownership hand-off).
type RemoteRef struct {
	// Key is the object's key in the Storage's Blobstore, under
	// RemotePrefix.
	Key string `json:"key"`
	// Size is the object's length in bytes.
	Size int64 `json:"size"`
}

// RemoteState is the view of remote-mode state a Storage needs
// ((*state.Store).CheckpointRemote returns one).
type RemoteState interface {
	// CheckpointObjects returns, per owner, the objects the checkpoint
	// in dir (a StateDir) references.
	CheckpointObjects(ctx context.Context, dir string) (map[string][]RemoteRef, error)
	// LiveObjects returns, per owner, the objects the open databases
	// reference now.
	LiveObjects() (map[string][]RemoteRef, error)
	// Prefixes returns, per owner, the key prefix (ending in '/') under
	// which the open databases create new objects.
	Prefixes() map[string]string
}

// UseRemote puts the Storage in remote mode: from now on Save records
// r.CheckpointObjects(StateDir(id)) in the record (Record.Remote) instead
// of uploading those objects, and GC protects r's live objects and
// prefixes. Call it after opening the state (after Acquire or Restore).
func (s *Storage) UseRemote(r RemoteState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.remote = r
}
