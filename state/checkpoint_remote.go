package state

import (
	"context"

	"github.com/tidemark-io/tidemark/blobstorage"
)

// CheckpointRemote returns the Store's remote-mode view for
// blobstorage.Storage.UseRemote: the objects a checkpoint references, the
// objects the open databases reference and their creation prefixes, all
// by owner. In local mode every answer is empty.
func (s *Store) CheckpointRemote() blobstorage.RemoteState { return remoteView{s} }

type remoteView struct{ s *Store }

func (c remoteView) CheckpointObjects(ctx context.Context, dir string) (map[string][]blobstorage.RemoteRef, error) {
	objs, err := c.s.RemoteObjects(ctx, dir)
	if err != nil {
		return nil, err
	}
	return byOwner(objs), nil
}

func (c remoteView) LiveObjects() (map[string][]blobstorage.RemoteRef, error) {
	objs, err := c.s.LiveRemoteObjects()
	if err != nil {
		return nil, err
	}
	return byOwner(objs), nil
}

func (c remoteView) Prefixes() map[string]string { return c.s.RemotePrefixes() }

func byOwner(objs []RemoteObject) map[string][]blobstorage.RemoteRef {
	out := map[string][]blobstorage.RemoteRef{}
	for _, o := range objs {
		out[o.Owner] = append(out[o.Owner], blobstorage.RemoteRef{Key: o.Key, Size: o.Size})
	}
	return out
}
