package remotetest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
)

// FakeRemote stands for state in remote mode in the checkpoint.Storage suite
// (checkpoint/storagetest, whose state directories are not Pebble
// databases): every owner directory of
// a checkpoint that holds a file (as a Pebble database does; the suite's
// "nested/w1" layout, which state never makes, is skipped) references one
// object, which it creates in the store as Pebble would have before the
// checkpoint.
type FakeRemote struct{ Store blobstore.Blobstore }

func (f FakeRemote) CheckpointObjects(ctx context.Context, dir string) (map[string][]blobstorage.RemoteRef, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[string][]blobstorage.RemoteRef{}
	for _, e := range entries {
		files, err := os.ReadDir(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		if !slices.ContainsFunc(files, func(f os.DirEntry) bool { return f.Type().IsRegular() }) {
			continue
		}
		key := blobstorage.RemotePrefix + "/" + e.Name() + "/e1-fake/" + filepath.Base(dir) + ".sst"
		body := []byte("table of " + key)
		if err := f.Store.Put(ctx, key, bytes.NewReader(body)); err != nil {
			return nil, err
		}
		out[e.Name()] = []blobstorage.RemoteRef{{Key: key, Size: int64(len(body))}}
	}
	return out, nil
}

func (FakeRemote) LiveObjects() (map[string][]blobstorage.RemoteRef, error) { return nil, nil }
func (FakeRemote) Prefixes() map[string]string                              { return nil }

// ForSuite puts s (acquired, on bs) in remote mode with a FakeRemote, for
// the checkpoint.Storage suite, and checks when the test ends that every
// saved owner directory holding a file was handed over: its record
// references its object, and Verify finds it.
func ForSuite(t *testing.T, s *blobstorage.Storage, bs blobstore.Blobstore) checkpoint.Storage {
	s.UseRemote(FakeRemote{Store: bs})
	t.Cleanup(func() {
		ctx := context.WithoutCancel(t.Context())
		ids, err := s.IDs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			rec, err := s.LoadRecord(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			for owner, files := range rec.Files {
				if len(files) > 0 && rec.StateDirs[owner] == owner && len(rec.Remote[owner]) != 1 {
					t.Errorf("%s: owner %q has files but remote objects %v", id, owner, rec.Remote[owner])
				}
			}
			if err := s.Verify(ctx, id); err != nil {
				t.Errorf("verify %s: %v", id, err)
			}
		}
	})
	return s
}
