package state

import (
	"context"

	"github.com/tidemark-io/tidemark/blobstore"
)

// CheckpointRemote returns the Store's remote-mode view for
// blobstorage.Storage.UseRemote: the objects a checkpoint references, the
// objects the open databases reference and their creation prefixes, all
// by owner. In local mode every answer is empty.
func (s *Store) CheckpointRemote() RemoteView { return RemoteView{s} }

// RemoteView is the Store's remote-mode view (a blobstorage.RemoteState;
// state does not import blobstorage, which sits above it).
type RemoteView struct{ s *Store }

// CheckpointObjects returns, per owner, the objects the checkpoint in
// dir references.
func (c RemoteView) CheckpointObjects(ctx context.Context, dir string) (map[string][]blobstore.Ref, error) {
	objs, err := c.s.RemoteObjects(ctx, dir)
	if err != nil {
		return nil, err
	}
	return byOwner(objs), nil
}

// LiveObjects returns, per owner, the objects the open databases
// reference now.
func (c RemoteView) LiveObjects() (map[string][]blobstore.Ref, error) {
	objs, err := c.s.LiveRemoteObjects()
	if err != nil {
		return nil, err
	}
	return byOwner(objs), nil
}

// Prefixes returns, per owner, the prefix new objects are created under.
func (c RemoteView) Prefixes() map[string]string { return c.s.RemotePrefixes() }

func byOwner(objs []RemoteObject) map[string][]blobstore.Ref {
	out := map[string][]blobstore.Ref{}
	for _, o := range objs {
		out[o.Owner] = append(out[o.Owner], blobstore.Ref{Key: o.Key, Size: o.Size})
	}
	return out
}
