package state

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
	"github.com/tidemark-io/tidemark/blobstore/memstore"
)

// countingStore counts the calls that move object bytes or metadata.
type countingStore struct {
	blobstore.Blobstore
	gets, puts, stats atomic.Int64
	got               atomic.Int64 // bytes asked for by GetRange
}

func (c *countingStore) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	c.gets.Add(1)
	c.got.Add(n)
	return c.Blobstore.GetRange(ctx, key, off, n)
}

func (c *countingStore) Put(ctx context.Context, key string, r io.Reader) error {
	c.puts.Add(1)
	return c.Blobstore.Put(ctx, key, r)
}

func (c *countingStore) Stat(ctx context.Context, key string) (blobstore.ObjectInfo, error) {
	c.stats.Add(1)
	return c.Blobstore.Stat(ctx, key)
}

func remoteOpts(bs blobstore.Blobstore, gen string, levels RemoteLevels) Options {
	return Options{
		MemTableSize: 256 << 10, CacheSize: 8 << 20, // holds the test state: reads after the first go to the store or the secondary cache once
		Remote: RemoteOptions{Store: bs, Prefix: "job/remote", Generation: gen, Levels: levels, CacheSize: 4 << 20},
	}
}

const remoteTestKeys = 3000

// fillRemote writes remoteTestKeys keys of seed to each owner, flushing
// every 1000 so that there are several tables, and compacts everything
// into the bottom level (remote in both modes).
func fillRemote(t *testing.T, s *Store, seed uint64, owners ...string) {
	t.Helper()
	for _, id := range owners {
		o, err := s.Owner(id)
		if err != nil {
			t.Fatal(err)
		}
		for i := range uint64(remoteTestKeys) {
			k, v := GenerateKV(seed, i, 100)
			if err := o.Set(k, v); err != nil {
				t.Fatal(err)
			}
			if i%1000 == 999 {
				if err := o.Flush(); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := o.db.Compact(t.Context(), []byte{0}, []byte{0xff}, false); err != nil {
			t.Fatal(err)
		}
	}
}

// checkRemote reads every key of seed in every owner, and returns the
// first error.
func checkRemote(t *testing.T, s *Store, seed uint64, owners ...string) error {
	t.Helper()
	for _, id := range owners {
		o, err := s.Owner(id)
		if err != nil {
			return err
		}
		for i := range uint64(remoteTestKeys) {
			k, want := GenerateKV(seed, i, 100)
			got, ok, err := o.Get(k)
			if err != nil {
				return err
			}
			if !ok || !bytes.Equal(got, want) {
				t.Fatalf("owner %q key %q: got %q (present %v), want the written value", id, k, got, ok)
			}
		}
	}
	return nil
}

// copyLocalPart copies a checkpoint directory somewhere else, as a
// download of its files onto an empty node would.
func copyLocalPart(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "downloaded")
	files, err := ListFiles(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		p := filepath.Join(dst, filepath.FromSlash(f.RelPath))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := copyFile(filepath.Join(src, filepath.FromSlash(f.RelPath)), p); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func openRemote(t *testing.T, dir string, opts Options) *Store {
	t.Helper()
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// checkpointRemote writes state, checkpoints it and returns the
// checkpoint directory and the objects it refers to.
func checkpointRemote(t *testing.T, bs blobstore.Blobstore, levels RemoteLevels, owners ...string) (*Store, string, []RemoteObject) {
	t.Helper()
	s := openRemote(t, filepath.Join(t.TempDir(), "live"), remoteOpts(bs, "e1", levels))
	fillRemote(t, s, 1, owners...)
	cp := filepath.Join(t.TempDir(), "cp")
	if _, err := s.Checkpoint(t.Context(), cp); err != nil {
		t.Fatal(err)
	}
	objs, err := s.RemoteObjects(t.Context(), cp)
	if err != nil {
		t.Fatal(err)
	}
	return s, cp, objs
}

func TestRemoteCheckpointUploadsNoTableInAllLevelsMode(t *testing.T) {
	bs := memstore.New()
	_, cp, objs := checkpointRemote(t, bs, RemoteAllLevels, "op-a", "op-b")
	files, err := ListFiles(cp)
	if err != nil {
		t.Fatal(err)
	}
	var catalogs int
	for _, f := range files {
		if f.Kind == Immutable {
			t.Errorf("checkpoint holds local table %s in all-levels mode", f.RelPath)
		}
		if strings.HasPrefix(filepath.Base(f.RelPath), "REMOTE-OBJ-CATALOG-") {
			catalogs++
		}
	}
	if catalogs != 2 {
		t.Fatalf("checkpoint holds %d remote object catalogs, want one per owner: %v", catalogs, files)
	}
	owners := map[string]int{}
	for _, o := range objs {
		owners[o.Owner]++
		if !strings.HasPrefix(o.Key, "job/remote/"+o.Owner+"/e1-") || !strings.HasSuffix(o.Key, ".sst") {
			t.Errorf("object key %q is not under job/remote/<owner>/e1-<nonce>/", o.Key)
		}
		info, err := bs.Stat(t.Context(), o.Key)
		if err != nil {
			t.Fatalf("referenced object: %v", err)
		}
		if info.Size != o.Size {
			t.Errorf("object %q: reported size %d, stored %d", o.Key, o.Size, info.Size)
		}
	}
	if owners["op-a"] == 0 || owners["op-b"] == 0 {
		t.Fatalf("objects per owner %v, want some for each", owners)
	}
	// Pebble's reference markers never reach the store.
	for _, k := range blobstoretest.ListKeys(t, bs, "") {
		if strings.Contains(k, ".ref.") {
			t.Fatalf("store holds reference marker %q", k)
		}
	}
}

func TestRemoteObjectsReadsNoObject(t *testing.T) {
	cs := &countingStore{Blobstore: memstore.New()}
	s, _, _ := checkpointRemote(t, cs, RemoteAllLevels, "op-a")
	cp := filepath.Join(t.TempDir(), "cp2")
	if _, err := s.Checkpoint(t.Context(), cp); err != nil {
		t.Fatal(err)
	}
	before, err := ListFiles(cp)
	if err != nil {
		t.Fatal(err)
	}
	gets, stats := cs.gets.Load(), cs.stats.Load()
	objs, err := s.RemoteObjects(t.Context(), cp)
	if err != nil {
		t.Fatal(err)
	}
	// Opening the checkpoint read-only left it as it was (Pebble would
	// have created a LOCK file in it).
	if after, err := ListFiles(cp); err != nil || !slices.Equal(after, before) {
		t.Fatalf("RemoteObjects changed the checkpoint directory: %v, then %v (%v)", before, after, err)
	}
	if len(objs) == 0 {
		t.Fatal("no remote objects")
	}
	if g, st := cs.gets.Load()-gets, cs.stats.Load()-stats; g != 0 || st != 0 {
		t.Fatalf("RemoteObjects sent %d ranged reads and %d stats, want none", g, st)
	}
}

func TestRemoteLowerLevelsKeepsUpperLevelsLocal(t *testing.T) {
	bs := memstore.New()
	s, _, objs := checkpointRemote(t, bs, RemoteLowerLevels, "op-a")
	if len(objs) == 0 {
		t.Fatal("the bottom level is not remote in lower-levels mode")
	}
	// A flush after the compaction lands in L0, which stays local.
	o, _ := s.Owner("op-a")
	if err := o.Set([]byte("fresh"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(t.TempDir(), "cp2")
	if _, err := s.Checkpoint(t.Context(), cp); err != nil {
		t.Fatal(err)
	}
	files, err := ListFiles(cp)
	if err != nil {
		t.Fatal(err)
	}
	var local int
	for _, f := range files {
		if f.Kind == Immutable {
			local++
		}
	}
	if local == 0 {
		t.Fatalf("no local table in a lower-levels checkpoint after a flush: %v", files)
	}
	objs2, err := s.RemoteObjects(t.Context(), cp)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs2) != len(objs) {
		t.Fatalf("a flush changed the remote objects from %d to %d", len(objs), len(objs2))
	}
}

func TestRemoteRestoreOnEmptyNodeReadsEveryKey(t *testing.T) {
	for _, levels := range []RemoteLevels{RemoteAllLevels, RemoteLowerLevels} {
		t.Run(levels.String(), func(t *testing.T) {
			cs := &countingStore{Blobstore: memstore.New()}
			live, cp, _ := checkpointRemote(t, cs, levels, "op-a", "op-b")
			if err := live.Close(); err != nil {
				t.Fatal(err)
			}
			local := copyLocalPart(t, cp)
			gets := cs.gets.Load()
			s, err := OpenCheckpoint(t.Context(), local, filepath.Join(t.TempDir(), "work"), remoteOpts(cs, "e2", levels))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := checkRemote(t, s, 1, "op-a", "op-b"); err != nil {
				t.Fatal(err)
			}
			if cs.gets.Load() == gets {
				t.Fatal("the restored store read no block from the object store")
			}
		})
	}
}

func TestRemoteSuccessorAndFencedWriterNeverShareAKey(t *testing.T) {
	bs := memstore.New()
	zombie, cp, _ := checkpointRemote(t, bs, RemoteAllLevels, "op-a")
	// Even a successor given the same generation label (a caller's bug)
	// gets a locator of its own.
	succ, err := OpenCheckpoint(t.Context(), copyLocalPart(t, cp), filepath.Join(t.TempDir(), "work"), remoteOpts(bs, "e1", RemoteAllLevels))
	if err != nil {
		t.Fatal(err)
	}
	defer succ.Close()
	// Both continue from the same file numbers and creator id; each
	// writes different data and compacts, so each creates, reads and
	// deletes tables of its own.
	fillRemote(t, zombie, 2, "op-a")
	fillRemote(t, succ, 3, "op-a")
	if err := checkRemote(t, zombie, 2, "op-a"); err != nil {
		t.Fatal(err)
	}
	if err := checkRemote(t, succ, 3, "op-a"); err != nil {
		t.Fatal(err)
	}
	zp, sp := zombie.RemotePrefixes()["op-a"], succ.RemotePrefixes()["op-a"]
	if zp == sp || !strings.HasPrefix(sp, "job/remote/op-a/e1-") {
		t.Fatalf("prefixes: zombie %q, successor %q; want distinct, both under e1-", zp, sp)
	}
	liveZ, err := zombie.LiveRemoteObjects()
	if err != nil {
		t.Fatal(err)
	}
	liveS, err := succ.LiveRemoteObjects()
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range liveS {
		if !strings.HasPrefix(o.Key, sp) {
			t.Fatalf("after a full compaction the successor refers to %q, outside its prefix", o.Key)
		}
	}
	for _, o := range liveZ {
		if !strings.HasPrefix(o.Key, zp) {
			t.Fatalf("the zombie refers to %q, outside its prefix", o.Key)
		}
	}
}

func TestRemoteObjectsOfAnEarlierWriterAreNeverDeleted(t *testing.T) {
	bs := memstore.New()
	live, cp, objs := checkpointRemote(t, bs, RemoteAllLevels, "op-a")
	if err := live.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := OpenCheckpoint(t.Context(), copyLocalPart(t, cp), filepath.Join(t.TempDir(), "work"), remoteOpts(bs, "e2", RemoteAllLevels))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Rewrite everything: the restored tables become obsolete in the new
	// database, and the tables it flushes in between are compacted away.
	fillRemote(t, s, 1, "op-a")
	fillRemote(t, s, 4, "op-a")
	for _, o := range objs {
		if ok, err := bs.Exists(t.Context(), o.Key); err != nil || !ok {
			t.Fatalf("object %q of the checkpoint was deleted by the next writer (%v)", o.Key, err)
		}
	}
	o, _ := s.Owner("op-a")
	o.db.TestOnlyWaitForCleaning() // Pebble deletes obsolete objects in the background
	liveObjs, err := s.LiveRemoteObjects()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, o := range liveObjs {
		want[o.Key] = true
	}
	for _, k := range blobstoretest.ListKeys(t, bs, s.RemotePrefixes()["op-a"]) {
		if !want[k] {
			t.Errorf("object %q, created and dropped by this writer without a checkpoint, was not deleted", k)
		}
	}
	if len(liveObjs) == 0 {
		t.Fatal("no live objects")
	}
}

func TestRemoteCheckpointedObjectsOutliveCompaction(t *testing.T) {
	bs := memstore.New()
	s, _, objs := checkpointRemote(t, bs, RemoteAllLevels, "op-a")
	fillRemote(t, s, 5, "op-a")
	for _, o := range objs {
		if ok, _ := bs.Exists(t.Context(), o.Key); !ok {
			t.Fatalf("object %q of a checkpoint was deleted by a later compaction", o.Key)
		}
	}
}

func restoreAfter(t *testing.T, damage func(bs *memstore.Store, obj RemoteObject)) (*Store, RemoteObject) {
	t.Helper()
	bs := memstore.New()
	live, cp, objs := checkpointRemote(t, bs, RemoteAllLevels, "op-a")
	if err := live.Close(); err != nil {
		t.Fatal(err)
	}
	// The largest object holds data blocks of many keys.
	victim := objs[0]
	for _, o := range objs {
		if o.Size > victim.Size {
			victim = o
		}
	}
	damage(bs, victim)
	s, err := OpenCheckpoint(t.Context(), copyLocalPart(t, cp), filepath.Join(t.TempDir(), "work"), remoteOpts(bs, "e2", RemoteAllLevels))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, victim
}

func TestRemoteMissingObjectFailsReadsNamingIt(t *testing.T) {
	s, victim := restoreAfter(t, func(bs *memstore.Store, o RemoteObject) {
		if err := bs.Delete(context.Background(), o.Key); err != nil {
			t.Fatal(err)
		}
	})
	err := checkRemote(t, s, 1, "op-a")
	if err == nil {
		t.Fatal("every read succeeded with an object missing")
	}
	t.Logf("read error: %v", err)
	if !errors.Is(err, blobstore.ErrNotFound) || !errors.Is(err, ErrRemoteObject) || !strings.Contains(err.Error(), victim.Key) {
		t.Fatalf("read with %q missing: %v; want ErrNotFound naming it", victim.Key, err)
	}
}

func TestRemoteCorruptObjectFailsReads(t *testing.T) {
	s, victim := restoreAfter(t, func(bs *memstore.Store, o RemoteObject) {
		data := blobstoretest.Get(t, bs, o.Key)
		for i := 100; i < len(data)/2; i += 997 {
			data[i] ^= 0x5a
		}
		put(t, bs, o.Key, data)
	})
	err := checkRemote(t, s, 1, "op-a")
	if err == nil {
		t.Fatal("every read succeeded with a corrupt object")
	}
	t.Logf("read error: %v", err)
	if !errors.Is(err, ErrRemoteObject) || !strings.Contains(err.Error(), victim.Key) {
		t.Fatalf("read with %q corrupt: %v; want an error naming it", victim.Key, err)
	}
}

func TestRemoteTruncatedObjectFailsReads(t *testing.T) {
	s, victim := restoreAfter(t, func(bs *memstore.Store, o RemoteObject) {
		put(t, bs, o.Key, blobstoretest.Get(t, bs, o.Key)[:o.Size/2])
	})
	err := checkRemote(t, s, 1, "op-a")
	if err == nil {
		t.Fatal("every read succeeded with a truncated object")
	}
	t.Logf("read error: %v", err)
	if !errors.Is(err, ErrRemoteObject) || !strings.Contains(err.Error(), victim.Key) {
		t.Fatalf("read with %q truncated: %v; want an error naming it", victim.Key, err)
	}
}

func put(t *testing.T, bs blobstore.Blobstore, key string, data []byte) {
	t.Helper()
	if err := bs.Put(t.Context(), key, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
}

func TestRemoteOptionsAreValidated(t *testing.T) {
	for _, ro := range []RemoteOptions{
		{Store: memstore.New(), Generation: "e/1"},
		{Store: memstore.New(), Generation: strings.Repeat("g", 65)},
		{Store: memstore.New(), Prefix: "../up"},
		{Store: memstore.New(), Levels: 7},
	} {
		_, err := Open(t.TempDir(), Options{Remote: ro})
		if err == nil {
			t.Errorf("Open with %+v succeeded", ro)
		} else if !errors.Is(err, fs.ErrInvalid) && !errors.Is(err, blobstore.ErrInvalidKey) {
			t.Errorf("Open with %+v: %v, want fs.ErrInvalid or ErrInvalidKey", ro, err)
		}
	}
}

func TestLocalModeHasNoRemoteObjects(t *testing.T) {
	s := openRemote(t, filepath.Join(t.TempDir(), "live"), Options{MemTableSize: 256 << 10})
	o, _ := s.Owner("op-a")
	if err := o.Set([]byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(t.TempDir(), "cp")
	if _, err := s.Checkpoint(t.Context(), cp); err != nil {
		t.Fatal(err)
	}
	objs, err := s.RemoteObjects(t.Context(), cp)
	if err != nil || len(objs) != 0 {
		t.Fatalf("RemoteObjects in local mode: %v %v", objs, err)
	}
	if p := s.RemotePrefixes(); len(p) != 0 {
		t.Fatalf("RemotePrefixes in local mode: %v", p)
	}
}

func TestRemoteCheckpointWithoutRemoteTablesRestores(t *testing.T) {
	bs := memstore.New()
	s := openRemote(t, filepath.Join(t.TempDir(), "live"), remoteOpts(bs, "e1", RemoteLowerLevels))
	o, _ := s.Owner("op-a")
	if err := o.Set([]byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(t.TempDir(), "cp")
	if _, err := s.Checkpoint(t.Context(), cp); err != nil {
		t.Fatal(err)
	}
	objs, err := s.RemoteObjects(t.Context(), cp)
	if err != nil || len(objs) != 0 {
		t.Fatalf("RemoteObjects of a checkpoint whose only table is local: %v %v", objs, err)
	}
	r, err := OpenCheckpoint(t.Context(), copyLocalPart(t, cp), filepath.Join(t.TempDir(), "work"), remoteOpts(bs, "e2", RemoteLowerLevels))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ro, _ := r.Owner("op-a")
	if v, ok, err := ro.Get([]byte("k")); err != nil || !ok || string(v) != "v" {
		t.Fatalf("Get after restore: %q %v %v", v, ok, err)
	}
	// The restored database has a creator id again and can create remote
	// tables.
	if err := ro.db.Compact(t.Context(), []byte{0}, []byte{0xff}, false); err != nil {
		t.Fatal(err)
	}
	live, err := r.LiveRemoteObjects()
	if err != nil || len(live) != 1 {
		t.Fatalf("after compacting to L6: live remote objects %v %v, want one", live, err)
	}
}

func TestRemoteHydrateReadsTheStateAheadOfUse(t *testing.T) {
	cs := &countingStore{Blobstore: memstore.New()}
	live, cp, _ := checkpointRemote(t, cs, RemoteAllLevels, "op-a", "op-b")
	if err := live.Close(); err != nil {
		t.Fatal(err)
	}
	opts := remoteOpts(cs, "e2", RemoteAllLevels)
	opts.CacheSize = 32 << 20 // holds the whole state, so no read after hydration misses
	s, err := OpenCheckpoint(t.Context(), copyLocalPart(t, cp), filepath.Join(t.TempDir(), "work"), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	g0 := cs.gets.Load()
	if err := s.Hydrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	g1 := cs.gets.Load()
	if g1 == g0 {
		t.Fatal("Hydrate read nothing from the store")
	}
	if err := checkRemote(t, s, 1, "op-a", "op-b"); err != nil {
		t.Fatal(err)
	}
	if g := cs.gets.Load() - g1; g != 0 {
		t.Fatalf("reads after hydration sent %d ranged reads to the store, want none", g)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.Hydrate(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Hydrate with a cancelled context: %v", err)
	}
}

// In remote mode Hydrate reads each object once, whole, in chunks of
// hydrateChunk: no byte twice, and no more requests than chunks.
func TestRemoteHydrateReadsEachObjectOnceInLargeReads(t *testing.T) {
	cs := &countingStore{Blobstore: memstore.New()}
	live, cp, objs := checkpointRemote(t, cs, RemoteAllLevels, "op-a", "op-b")
	if err := live.Close(); err != nil {
		t.Fatal(err)
	}
	var size, chunks int64
	for _, obj := range objs {
		size += obj.Size
		chunks += (obj.Size + hydrateChunk - 1) / hydrateChunk
	}
	opts := remoteOpts(cs, "e2", RemoteAllLevels)
	opts.Remote.CacheSize = 32 << 20
	s, err := OpenCheckpoint(t.Context(), copyLocalPart(t, cp), filepath.Join(t.TempDir(), "work"), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	g0, b0 := cs.gets.Load(), cs.got.Load()
	if err := s.Hydrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	if gets, got := cs.gets.Load()-g0, cs.got.Load()-b0; gets != chunks || got != size {
		t.Fatalf("Hydrate sent %d ranged reads for %d bytes, want %d for the %d bytes of %d objects", gets, got, chunks, size, len(objs))
	}
}

// Hydrate reads no more of an owner's objects than 7/8 of its cache
// holds: reading more would evict what it read first.
func TestRemoteHydrateReadsNoMoreThanTheCacheHolds(t *testing.T) {
	cs := &countingStore{Blobstore: memstore.New()}
	live, cp, objs := checkpointRemote(t, cs, RemoteAllLevels, "op-a")
	if err := live.Close(); err != nil {
		t.Fatal(err)
	}
	opts := remoteOpts(cs, "e2", RemoteAllLevels)
	opts.Remote.CacheSize = objs[0].Size // 7/8 of it holds no object
	s, err := OpenCheckpoint(t.Context(), copyLocalPart(t, cp), filepath.Join(t.TempDir(), "work"), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	g0 := cs.gets.Load()
	if err := s.Hydrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	if gets := cs.gets.Load() - g0; gets != 0 {
		t.Fatalf("Hydrate sent %d ranged reads with a cache too small for any object, want none", gets)
	}
}

// Three writers in a row, each restored from its predecessor's
// checkpoint and writing before its own: the third one's first write
// rotates Pebble's remote object catalog. Pebble names the new catalog
// after its marker's next iteration, and a checkpoint's marker restarts at
// iteration 1 whatever the catalog is called, so without alignment the
// rotation recreated the current catalog's name and then removed it: the
// next checkpoint failed ("REMOTE-OBJ-CATALOG-000002: no such file") and
// the directory could not be opened again.
func TestRemoteThirdRestoreKeepsItsObjectCatalog(t *testing.T) {
	bs := memstore.New()
	s := openRemote(t, filepath.Join(t.TempDir(), "live"), remoteOpts(bs, "e1", RemoteAllLevels))
	for gen := 1; gen <= 4; gen++ {
		fillRemote(t, s, uint64(gen), "op-a")
		cp := filepath.Join(t.TempDir(), "cp")
		if _, err := s.Checkpoint(t.Context(), cp); err != nil {
			t.Fatalf("writer %d: checkpoint: %v", gen, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		var err error
		s, err = OpenCheckpoint(t.Context(), copyLocalPart(t, cp), filepath.Join(t.TempDir(), "work"), remoteOpts(bs, fmt.Sprint("e", gen+1), RemoteAllLevels))
		if err != nil {
			t.Fatalf("writer %d: open the checkpoint of writer %d: %v", gen+1, gen, err)
		}
		if err := checkRemote(t, s, uint64(gen), "op-a"); err != nil {
			t.Fatal(err)
		}
	}
	_ = s.Close()
}

// A checkpoint opened read-only reads every key, creates no object in
// the store, and refuses writes; Stats counts its tables and keys.
func TestRemoteReadOnlyOpenWritesNothing(t *testing.T) {
	cs := &countingStore{Blobstore: memstore.New()}
	live, cp, _ := checkpointRemote(t, cs, RemoteAllLevels, "op-a")
	if err := live.Close(); err != nil {
		t.Fatal(err)
	}
	puts := cs.puts.Load()
	opts := remoteOpts(cs, "e2", RemoteAllLevels)
	opts.ReadOnly = true
	s, err := OpenCheckpoint(t.Context(), copyLocalPart(t, cp), filepath.Join(t.TempDir(), "work"), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := checkRemote(t, s, 1, "op-a"); err != nil {
		t.Fatal(err)
	}
	o, err := s.Owner("op-a")
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Set([]byte("k"), []byte("v")); err == nil {
		t.Error("a read-only owner took a write")
	}
	st, err := o.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.Tables == 0 || st.Keys != remoteTestKeys {
		t.Errorf("Stats: %+v, want tables and %d keys", st, remoteTestKeys)
	}
	if _, err := s.Owner("op-new"); err == nil {
		t.Error("a read-only store created an owner")
	}
	if n := cs.puts.Load() - puts; n != 0 {
		t.Errorf("the read-only open wrote %d objects to the store", n)
	}
}
