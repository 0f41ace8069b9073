package blobstorage_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/memstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/checkpoint/storagetest"
)

// fakeRemote stands for state in remote mode in the Storage suite (whose
// state directories are not Pebble databases): every owner directory of
// a checkpoint that holds a file (as a Pebble database does; the suite's
// "nested/w1" layout, which state never makes, is skipped) references one
// object, which it creates in the store as Pebble would have before the
// checkpoint.
type fakeRemote struct{ bs blobstore.Blobstore }

func (f fakeRemote) CheckpointObjects(ctx context.Context, dir string) (map[string][]blobstorage.RemoteRef, error) {
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
		if err := f.bs.Put(ctx, key, bytes.NewReader(body)); err != nil {
			return nil, err
		}
		out[e.Name()] = []blobstorage.RemoteRef{{Key: key, Size: int64(len(body))}}
	}
	return out, nil
}

func (fakeRemote) LiveObjects() (map[string][]blobstorage.RemoteRef, error) { return nil, nil }
func (fakeRemote) Prefixes() map[string]string                              { return nil }

// RemoteSuiteStorage returns an acquired Storage in remote mode on bs.
func remoteSuiteStorage(t *testing.T, bs blobstore.Blobstore) checkpoint.Storage {
	s := acquired(t, bs).(*blobstorage.Storage)
	s.UseRemote(fakeRemote{bs})
	// Every saved owner directory holding a file was handed over: its
	// record references its object, which exists with its size.
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

func TestStorageSuiteInRemoteMode(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) checkpoint.Storage { return remoteSuiteStorage(t, memstore.New()) })
}
