package integration

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/objstorage/remote"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstorage/remotetest"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/integration/miniotest"
	"github.com/tidemark-io/tidemark/s3store"
	"github.com/tidemark-io/tidemark/state"
	"github.com/tidemark-io/tidemark/state/remotestore"
)

// These tests run instant restore on a real MinIO: remotestore's
// remote.Storage on s3store (Pebble's expectations of the interface, a
// multipart upload streamed through CreateObject, ranged reads), and
// state in remote mode checkpointed through blobstorage.Storage
// (which uploads only the local part), restored on an empty node,
// read at once, and failing loudly when an object is missing or corrupt.

// instantStore returns an s3store on a fresh bucket of the shared MinIO,
// with parts of 5 MiB so that multipart uploads are cheap to reach.
func instantStore(t *testing.T) blobstore.Blobstore {
	t.Helper()
	srv := miniotest.Shared(t)
	bs, err := s3store.New(t.Context(), s3store.Options{
		Bucket: srv.NewBucket(t), Endpoint: srv.Endpoint, Region: srv.Region, PathStyle: true,
		AccessKey: srv.AccessKey, SecretKey: srv.SecretKey, PartSize: 5 << 20,
	})
	if err != nil {
		t.Fatal(err)
	}
	return bs
}

func TestInstantRemoteStorageOnMinIO(t *testing.T) {
	bs := instantStore(t)
	s, err := remotestore.New(bs, "job/sst", remotestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	// A multipart upload streamed through the pipe: nothing visible
	// until Close.
	data := blobstoretest.Payload(9, 11<<20+3)
	w, err := s.CreateObject("big.sst")
	if err != nil {
		t.Fatal(err)
	}
	for chunk := range slices.Chunk(data, 64<<10) {
		if _, err := w.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := bs.Exists(t.Context(), "job/sst/big.sst"); err != nil || ok {
		t.Fatalf("object visible before Close: %v %v", ok, err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	r, size, err := s.ReadObject(t.Context(), "big.sst")
	if err != nil {
		t.Fatal(err)
	}
	if size != int64(len(data)) {
		t.Fatalf("size %d, want %d", size, len(data))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			off := int64(g) * (size / 8)
			p := make([]byte, 256<<10)
			if g == 7 {
				p = make([]byte, size-off) // up to the last byte exactly
			}
			if err := r.ReadAt(t.Context(), p, off); err != nil {
				errs <- err
				return
			}
			if !bytes.Equal(p, data[off:off+int64(len(p))]) {
				errs <- fmt.Errorf("read at %d: wrong bytes", off)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := r.ReadAt(t.Context(), make([]byte, 2), size-1); err == nil {
		t.Fatal("a read past the end succeeded")
	}

	// An aborted upload leaves nothing, a missing object is not-exist.
	w, err = s.CreateObject("aborted.sst")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data[:6<<20]); err != nil {
		t.Fatal(err)
	}
	w.(remotestore.ObjectWriter).Abort(errors.New("test"))
	if _, err := s.Size("aborted.sst"); !s.IsNotExistError(err) {
		t.Fatalf("Size of an aborted upload: %v, want not-exist", err)
	}

	for _, name := range []string{"b/4", "b/5", "b/6", "a"} {
		w, err := s.CreateObject(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := s.List("", "/"); err != nil || !slices.Equal(got, []string{"a", "b", "big.sst"}) {
		t.Fatalf(`List("", "/") = %q, %v`, got, err)
	}
	if got, err := s.List("b", "/"); err != nil || !slices.Equal(got, []string{"4", "5", "6"}) {
		t.Fatalf(`List("b", "/") = %q, %v`, got, err)
	}
	for range 2 {
		if err := s.Delete("big.sst"); err != nil {
			t.Fatalf("Delete: %v", err)
		}
	}
	if err := r.ReadAt(t.Context(), make([]byte, 10), 0); !s.IsNotExistError(err) || !strings.Contains(err.Error(), "job/sst/big.sst") {
		t.Fatalf("read of a deleted object: %v, want not-exist naming it", err)
	}
}

// TestInstantPebbleOnMinIO is Pebble's own use of the Storage on S3:
// every table created, compacted, deleted and read back through MinIO.
func TestInstantPebbleOnMinIO(t *testing.T) {
	bs := instantStore(t)
	s, err := remotestore.New(bs, "pebble", remotestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	o := &pebble.Options{FS: vfs.NewMem(), FormatMajorVersion: pebble.FormatNewest, MemTableSize: 1 << 20}
	o.Experimental.RemoteStorage = remote.MakeSimpleFactory(map[remote.Locator]remote.Storage{"": s})
	o.Experimental.CreateOnShared = remote.CreateOnSharedAll
	o.Experimental.SecondaryCacheSizeBytes = 8 << 20
	db, err := pebble.Open("db", o)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.SetCreatorID(1); err != nil {
		t.Fatal(err)
	}
	const n = 8_000
	for i := range uint64(n) {
		k, v := state.GenerateKV(5, i, 200)
		if err := db.Set(k, v, pebble.NoSync); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Compact(t.Context(), []byte{0}, []byte{0xff}, false); err != nil {
		t.Fatal(err)
	}
	for i := range uint64(n) {
		k, want := state.GenerateKV(5, i, 200)
		got, closer, err := db.Get(k)
		if err != nil {
			t.Fatalf("Get %q: %v", k, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("Get %q: wrong value", k)
		}
		closer.Close()
	}
	if len(blobstoretest.ListKeys(t, bs, "pebble/")) == 0 {
		t.Fatal("no table in the bucket")
	}
}

// instantTestOptions keep Pebble small but give it a block cache that
// holds the index and filter blocks: with pebbleTestOptions' 1 MiB every
// read goes to the secondary cache's file at least twice.
var instantTestOptions = state.Options{MemTableSize: 1 << 20, CacheSize: 16 << 20}

// instantCheckpoint writes keys [0, keys) to the owners of a remote-mode
// store on bs, checkpoints it, saves the local part with BlobStorage
// under "ckpt" and returns the checkpoint id, the objects it refers to
// and what a Restore needs.
func instantCheckpoint(t *testing.T, bs blobstore.Blobstore, levels state.RemoteLevels, owners []string, keys uint64) (ckpt blobstore.Blobstore, id string, objs []state.RemoteObject, model kvModel) {
	t.Helper()
	ckpt, err := blobstore.WithPrefix(bs, "ckpt")
	if err != nil {
		t.Fatal(err)
	}
	w := blobstorage.New(ckpt, t.TempDir(), blobstorage.Options{})
	epoch, err := w.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	opts := instantTestOptions
	opts.Remote = state.RemoteOptions{Store: ckpt, Prefix: blobstorage.RemotePrefix, Generation: blobstorage.RemoteGeneration(epoch), Levels: levels}
	st, err := state.Open(filepath.Join(t.TempDir(), "live"), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	w.UseRemote(st.CheckpointRemote())
	model = kvModel{}
	writeKeys(t, st, model, owners, 1, 0, keys, 256)
	id = checkpoint.NewID(1)
	dirs, err := st.Checkpoint(t.Context(), w.StateDir(id))
	if err != nil {
		t.Fatal(err)
	}
	objs, err = st.RemoteObjects(t.Context(), w.StateDir(id))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Save(t.Context(), completedRecord(id, dirs)); err != nil {
		t.Fatal(err)
	}
	return ckpt, id, objs, model
}

// instantRestore restores checkpoint id's local part on an empty node
// and opens it in remote mode.
func instantRestore(t *testing.T, bs, ckpt blobstore.Blobstore, id string, levels state.RemoteLevels) *state.Store {
	t.Helper()
	dir := restoreOnEmptyNode(t, ckpt, id)
	opts := instantTestOptions
	opts.Remote = state.RemoteOptions{Store: ckpt, Prefix: blobstorage.RemotePrefix, Generation: "e2", Levels: levels}
	st, err := state.OpenCheckpoint(t.Context(), dir, filepath.Join(t.TempDir(), "work"), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// readModel reads every key of model and returns the first read error.
func readModel(t *testing.T, st *state.Store, model kvModel) error {
	t.Helper()
	return remotetest.ReadModel(t, st, remotetest.Model(model))
}

func TestInstantRestoreOnMinIO(t *testing.T) {
	owners := []string{"op-0", "op-1"}
	for _, levels := range []state.RemoteLevels{state.RemoteAllLevels, state.RemoteLowerLevels} {
		t.Run(levels.String(), func(t *testing.T) {
			bs := instantStore(t)
			ckpt, id, objs, model := instantCheckpoint(t, bs, levels, owners, 6_000)
			if len(objs) == 0 {
				t.Fatal("the checkpoint refers to no remote object")
			}
			// The checkpoint uploaded only local files: no table of the
			// remote objects went into the checkpoint layer's keys.
			for _, k := range blobstoretest.ListKeys(t, ckpt, "") {
				if levels == state.RemoteAllLevels && strings.HasSuffix(k, ".sst") && !strings.HasPrefix(k, blobstorage.RemotePrefix+"/") {
					t.Errorf("all-levels checkpoint uploaded table %q", k)
				}
			}
			st := instantRestore(t, bs, ckpt, id, levels)
			if err := readModel(t, st, model); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestInstantRestoreFailsNamingAMissingOrCorruptObject(t *testing.T) {
	owners := []string{"op-0"}
	for _, c := range []struct {
		name   string
		damage func(t *testing.T, bs blobstore.Blobstore, key string)
		is     error
	}{
		{"missing", func(t *testing.T, bs blobstore.Blobstore, key string) {
			if err := bs.Delete(t.Context(), key); err != nil {
				t.Fatal(err)
			}
		}, blobstore.ErrNotFound},
		{"corrupt", func(t *testing.T, bs blobstore.Blobstore, key string) {
			rc, err := bs.Get(t.Context(), key)
			if err != nil {
				t.Fatal(err)
			}
			data, err := io.ReadAll(rc)
			rc.Close()
			if err != nil {
				t.Fatal(err)
			}
			for i := 64; i < len(data)-64; i += 4093 {
				data[i] ^= 0xa5
			}
			if err := bs.Put(t.Context(), key, bytes.NewReader(data)); err != nil {
				t.Fatal(err)
			}
		}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			bs := instantStore(t)
			ckpt, id, objs, model := instantCheckpoint(t, bs, state.RemoteAllLevels, owners, 6_000)
			victim := objs[0]
			for _, o := range objs {
				if o.Size > victim.Size {
					victim = o
				}
			}
			c.damage(t, ckpt, victim.Key)
			st := instantRestore(t, bs, ckpt, id, state.RemoteAllLevels)
			err := readModel(t, st, model)
			t.Logf("read error: %v", err)
			if err == nil {
				t.Fatalf("every key read correctly with %s %s", victim.Key, c.name)
			}
			if !errors.Is(err, state.ErrRemoteObject) || !strings.Contains(err.Error(), victim.Key) {
				t.Fatalf("read with %s %s: %v; want ErrRemoteObject naming it", victim.Key, c.name, err)
			}
			if c.is != nil && !errors.Is(err, c.is) {
				t.Fatalf("read with %s %s: %v; want it to wrap %v", victim.Key, c.name, err, c.is)
			}
		})
	}
}
