package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/checkpoint/storagetest"
	"github.com/tidemark-io/tidemark/integration/miniotest"
	"github.com/tidemark-io/tidemark/s3store"
	"github.com/tidemark-io/tidemark/state"
)

// These tests run blobstorage.Storage on s3store against a real MinIO:
// the behaviour suite, restore of real Pebble state on a node with an
// empty disk, a Save that crashes at every write, a server that dies in
// the middle of a multipart upload, and retention.

// errInjectedWrite is what failingWrites returns for the write it fails.
var errInjectedWrite = errors.New("integration: injected write failure")

// failingWrites decorates bs: it counts the writes (Put, PutIfAbsent,
// PutIfMatch) in writes, and fails the one whose count is failAt.
func failingWrites(t *testing.T, bs blobstore.Blobstore, writes, failAt *atomic.Int64) *blobstoretest.Interceptor {
	return blobstoretest.Intercept(bs, blobstoretest.Hooks{
		Before: func(_ context.Context, c *blobstoretest.Call) error {
			if c.IsWrite() && writes.Add(1) == failAt.Load() {
				t.Logf("failing the write %s %s", c.Op, c.Key)
				return fmt.Errorf("%s %q: %w", c.Op, c.Key, errInjectedWrite)
			}
			return nil
		},
	})
}

// acquiredWriter returns a BlobStorage on bs with a fresh local directory,
// after Acquire.
func acquiredWriter(t *testing.T, bs blobstore.Blobstore, opts blobstorage.Options) *blobstorage.Storage {
	t.Helper()
	s := blobstorage.New(bs, t.TempDir(), opts)
	if _, err := s.Acquire(t.Context()); err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	return s
}

// completedRecord returns a completed checkpoint record for id with the
// given state directories.
func completedRecord(id string, dirs map[string]string) *checkpoint.CheckpointData {
	return &checkpoint.CheckpointData{
		ID: id, Timestamp: time.Now().UTC().Truncate(time.Second), Status: checkpoint.StatusCompleted,
		Operators: map[string][]byte{"0": []byte("op state of " + id)},
		Source:    map[string][]byte{checkpoint.SourceOffsetsKey: []byte("offsets of " + id)},
		TxnID:     "txn-" + id,
		StateDirs: dirs,
	}
}

// restoreOnEmptyNode restores checkpoint id from bs into a new, empty
// local directory and returns the restored StateDir.
func restoreOnEmptyNode(t *testing.T, bs blobstore.Blobstore, id string) string {
	t.Helper()
	node := blobstorage.New(bs, t.TempDir(), blobstorage.Options{})
	if err := node.Restore(t.Context(), id); err != nil {
		t.Fatalf("Restore(%s) on an empty node: %v", id, err)
	}
	return node.StateDir(id)
}

// latestCompletedID returns the id _latest-completed names through a
// reader that never writes, or "".
func latestCompletedID(t *testing.T, bs blobstore.Blobstore) string {
	t.Helper()
	d, err := blobstorage.New(bs, "", blobstorage.Options{}).LoadLatestCompleted(t.Context())
	if err != nil {
		t.Fatalf("LoadLatestCompleted: %v", err)
	}
	if d == nil {
		return ""
	}
	return d.ID
}

// pebbleTestOptions keep Pebble small for tests.
var pebbleTestOptions = state.Options{MemTableSize: 1 << 20, CacheSize: 1 << 20}

// kvModel is what a state.Store should hold: owner → key → value.
type kvModel map[string]map[string]string

func (m kvModel) clone() kvModel {
	c := kvModel{}
	for o, kv := range m {
		c[o] = maps.Clone(kv)
	}
	return c
}

// writeKeys sets keys [from, to) of every owner in owners, in batches,
// and records them in m (if not nil). Key i is the same for every
// valueSeed (state.GenerateKV with a per-owner key seed), so writing a
// range again with another valueSeed overwrites those keys with new
// pseudo-random values.
func writeKeys(t testing.TB, st *state.Store, m kvModel, owners []string, valueSeed, from, to uint64, valueSize int) {
	t.Helper()
	for _, id := range owners {
		o, err := st.Owner(id)
		if err != nil {
			t.Fatal(err)
		}
		if m != nil && m[id] == nil {
			m[id] = map[string]string{}
		}
		for lo := from; lo < to; lo += 1000 {
			hi := min(lo+1000, to)
			err := o.Apply(func(b *state.Batch) error {
				for i := lo; i < hi; i++ {
					k, v := stateKey(id, i), stateValue(id, valueSeed, i, valueSize)
					if m != nil {
						m[id][string(k)] = string(v)
					}
					if err := b.Set(k, v); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}

// stateKey returns key i of owner: the same for every value seed.
func stateKey(owner string, i uint64) []byte {
	k, _ := state.GenerateKV(ownerSeed(owner), i, 0)
	return k
}

// stateValue returns the value of key i of owner written with valueSeed.
func stateValue(owner string, valueSeed, i uint64, size int) []byte {
	_, v := state.GenerateKV(valueSeed<<20^ownerSeed(owner), i, size)
	return v
}

// ownerSeed derives a key seed from an owner id, so that owners hold
// different keys.
func ownerSeed(owner string) uint64 {
	var h uint64 = 14695981039346656037 // FNV-1a
	for i := 0; i < len(owner); i++ {
		h = (h ^ uint64(owner[i])) * 1099511628211
	}
	return h
}

// readPebble opens the state directories of a restored checkpoint with
// state.OpenCheckpoint and returns everything every owner holds.
func readPebble(t *testing.T, stateDir string) kvModel {
	t.Helper()
	st, err := state.OpenCheckpoint(t.Context(), stateDir, filepath.Join(t.TempDir(), "work"), pebbleTestOptions)
	if err != nil {
		t.Fatalf("OpenCheckpoint(%s): %v", stateDir, err)
	}
	defer st.Close()
	got := kvModel{}
	for _, id := range st.Owners() {
		o, err := st.Owner(id)
		if err != nil {
			t.Fatal(err)
		}
		got[id] = map[string]string{}
		for kv, err := range o.Scan(nil) {
			if err != nil {
				t.Fatalf("scan owner %q: %v", id, err)
			}
			got[id][string(kv.Key)] = string(kv.Value)
		}
	}
	return got
}

// sameKV fails unless got holds exactly the owners, keys and values of want.
func sameKV(t *testing.T, what string, got, want kvModel) {
	t.Helper()
	if g, w := slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)); !slices.Equal(g, w) {
		t.Fatalf("%s: owners %v, want %v", what, g, w)
	}
	for o, kv := range want {
		if len(got[o]) != len(kv) {
			t.Fatalf("%s: owner %q has %d keys, want %d", what, o, len(got[o]), len(kv))
		}
		for k, v := range kv {
			if gv, ok := got[o][k]; !ok || gv != v {
				t.Fatalf("%s: owner %q key %q: present=%v, value differs=%v", what, o, k, ok, gv != v)
			}
		}
	}
}

// TestBlobStorageOnMinIOPassesStorageSuite runs the checkpoint.Storage
// behaviour suite on a BlobStorage over s3store on MinIO: once with a
// fresh bucket per subtest, once with a fresh key prefix per subtest in a
// bucket shared by the subtests (how jobs share a bucket).
func TestBlobStorageOnMinIOPassesStorageSuite(t *testing.T) {
	blobStoragePassesStorageSuite(t, miniotest.Shared(t))
}

// blobStoragePassesStorageSuite is the body of the Storage suite tests, on
// a server of any kind.
func blobStoragePassesStorageSuite(t *testing.T, srv *miniotest.Server) {
	t.Run("BucketPerSubtest", func(t *testing.T) {
		storagetest.Run(t, func(t *testing.T) checkpoint.Storage {
			return acquiredWriter(t, openBucket(t, srv, srv.NewBucket(t)), blobstorage.Options{})
		})
	})
	t.Run("PrefixPerSubtest", func(t *testing.T) {
		shared := openBucket(t, srv, srv.NewBucket(t))
		var n atomic.Int64 // the subtests run in parallel
		storagetest.Run(t, func(t *testing.T) checkpoint.Storage {
			bs, err := blobstore.WithPrefix(shared, fmt.Sprintf("jobs/job-%d", n.Add(1)))
			if err != nil {
				t.Fatal(err)
			}
			return acquiredWriter(t, bs, blobstorage.Options{})
		})
	})
}

// TestBlobStorageRestoresPebbleStateOnEmptyNodeFromMinIO saves two
// checkpoints of real Pebble state (the second incremental), then a node
// with an empty disk finds the latest completed one, restores it, opens
// Pebble on it and reads back every key and value exactly; the older
// checkpoint restores to its own contents too.
func TestBlobStorageRestoresPebbleStateOnEmptyNodeFromMinIO(t *testing.T) {
	ctx := t.Context()
	srv := miniotest.Shared(t)
	bs := openBucket(t, srv, srv.NewBucket(t))
	w := acquiredWriter(t, bs, blobstorage.Options{})

	st, err := state.Open(filepath.Join(t.TempDir(), "live"), pebbleTestOptions)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	owners := []string{"op-0", "op-1"}
	model := kvModel{}

	writeKeys(t, st, model, owners, 1, 0, 1500, 100)
	id1 := checkpoint.NewID(1)
	dirs, err := st.Checkpoint(ctx, w.StateDir(id1))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Save(ctx, completedRecord(id1, dirs)); err != nil {
		t.Fatalf("Save(%s): %v", id1, err)
	}
	want1 := model.clone()

	// Overwrite a third of the keys and add as many new ones.
	writeKeys(t, st, model, owners, 2, 0, 500, 100)
	writeKeys(t, st, model, owners, 1, 1500, 2000, 100)
	id2 := checkpoint.NewID(2)
	dirs, err = st.Checkpoint(ctx, w.StateDir(id2))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Save(ctx, completedRecord(id2, dirs)); err != nil {
		t.Fatalf("Save(%s): %v", id2, err)
	}

	// A table the second checkpoint shares with the first (the same
	// inode, hard-linked by Pebble) is referenced where the first
	// checkpoint uploaded it, not uploaded again.
	files1, err := w.Files(ctx, id1)
	if err != nil {
		t.Fatal(err)
	}
	files2, err := w.Files(ctx, id2)
	if err != nil {
		t.Fatal(err)
	}
	shared := 0
	for owner, refs := range files2 {
		for _, f := range refs {
			fi1, err1 := os.Stat(filepath.Join(w.StateDir(id1), owner, f.Path))
			fi2, err2 := os.Stat(filepath.Join(w.StateDir(id2), owner, f.Path))
			if err1 != nil || err2 != nil || !os.SameFile(fi1, fi2) || !strings.HasSuffix(f.Path, ".sst") {
				continue
			}
			shared++
			i := slices.IndexFunc(files1[owner], func(r blobstorage.FileRef) bool { return r.Path == f.Path })
			if i < 0 || files1[owner][i].Key != f.Key {
				t.Errorf("owner %q table %s, unchanged since %s, is stored at %s in %s", owner, f.Path, id1, f.Key, id2)
			}
		}
	}
	t.Logf("%s shares %d tables with %s", id2, shared, id1)

	// A node with an empty disk.
	node := blobstorage.New(bs, t.TempDir(), blobstorage.Options{})
	latest, err := node.LoadLatestCompleted(ctx)
	if err != nil || latest == nil || latest.ID != id2 {
		t.Fatalf("LoadLatestCompleted on an empty node = %v, %v; want %s", latest, err, id2)
	}
	if string(latest.Offsets()) != "offsets of "+id2 || string(latest.Operators["0"]) != "op state of "+id2 {
		t.Fatalf("record of %s = %+v", id2, latest)
	}
	if err := checkpoint.Materialize(ctx, node, latest); err != nil {
		t.Fatalf("Materialize(%s): %v", id2, err)
	}
	sameKV(t, "restored "+id2, readPebble(t, node.StateDir(id2)), model)
	sameKV(t, "restored "+id1, readPebble(t, restoreOnEmptyNode(t, bs, id1)), want1)
}

// TestBlobStorageSaveCrashingAtAnyWriteKeepsPreviousCheckpointOnMinIO
// fails the k-th write of a Save, for every k: the previous completed
// checkpoint must still be the latest completed one and restore
// byte-exact on an empty node, and the same Save retried must succeed.
func TestBlobStorageSaveCrashingAtAnyWriteKeepsPreviousCheckpointOnMinIO(t *testing.T) {
	srv := miniotest.Shared(t)

	// The state of both checkpoints is made once, in a template
	// directory, and hard-linked into each run's local directory: the
	// second checkpoint shares tables with the first, as Pebble's do.
	template := t.TempDir()
	tmpl := blobstorage.New(nil, template, blobstorage.Options{})
	id1, id2 := checkpoint.NewID(1), checkpoint.NewID(2)
	{
		st, err := state.Open(filepath.Join(t.TempDir(), "live"), pebbleTestOptions)
		if err != nil {
			t.Fatal(err)
		}
		owners := []string{"op-0", "op-1"}
		writeKeys(t, st, nil, owners, 7, 0, 2000, 64)
		if _, err := st.Checkpoint(t.Context(), tmpl.StateDir(id1)); err != nil {
			t.Fatal(err)
		}
		writeKeys(t, st, nil, owners, 8, 1000, 3000, 64)
		if _, err := st.Checkpoint(t.Context(), tmpl.StateDir(id2)); err != nil {
			t.Fatal(err)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}
	dirs := map[string]string{"op-0": "op-0", "op-1": "op-1"}

	// run saves id1, then id2 with the k-th write of its Save failing
	// (k = 0: none), and returns how many writes the second Save made.
	run := func(t *testing.T, k int) int {
		ctx := t.Context()
		var writes, failAt atomic.Int64
		fs := failingWrites(t, openBucket(t, srv, srv.NewBucket(t)), &writes, &failAt)
		w := acquiredWriter(t, fs, blobstorage.Options{})
		for _, id := range []string{id1, id2} {
			if err := os.CopyFS(w.StateDir(id), os.DirFS(tmpl.StateDir(id))); err != nil {
				t.Fatal(err)
			}
		}
		// Re-link the tables id2 shares with id1 (CopyFS copies).
		linkShared(t, w.StateDir(id1), w.StateDir(id2))
		if err := w.Save(ctx, completedRecord(id1, dirs)); err != nil {
			t.Fatalf("Save(%s): %v", id1, err)
		}
		before := writes.Load()
		if k > 0 {
			failAt.Store(before + int64(k))
		}
		err := w.Save(ctx, completedRecord(id2, dirs))
		n := int(writes.Load() - before)
		if k == 0 {
			if err != nil {
				t.Fatalf("Save(%s): %v", id2, err)
			}
			return n
		}
		if !errors.Is(err, errInjectedWrite) {
			t.Fatalf("Save(%s) with write %d failing = %v, want the injected failure", id2, k, err)
		}
		if got := latestCompletedID(t, fs); got != id1 {
			t.Fatalf("after the failed Save, latest completed = %q, want %s", got, id1)
		}
		sameTree(t, w.StateDir(id1), restoreOnEmptyNode(t, fs, id1))

		if err := w.Save(ctx, completedRecord(id2, dirs)); err != nil {
			t.Fatalf("Save(%s) retried after the failure: %v", id2, err)
		}
		if got := latestCompletedID(t, fs); got != id2 {
			t.Fatalf("after the retried Save, latest completed = %q, want %s", got, id2)
		}
		sameTree(t, w.StateDir(id2), restoreOnEmptyNode(t, fs, id2))
		if err := w.Verify(ctx, id1); err != nil {
			t.Fatalf("Verify(%s) after the retried Save: %v", id1, err)
		}
		return n
	}

	var n int
	t.Run("NoFailure", func(t *testing.T) { n = run(t, 0) })
	if n < 4 {
		t.Fatalf("the second Save made %d writes; expected files, a record and two pointers", n)
	}
	for k := 1; k <= n; k++ {
		t.Run(fmt.Sprintf("FailWrite%d", k), func(t *testing.T) { run(t, k) })
	}
}

// linkShared replaces every *.sst under dir2 that has a same-named,
// same-content file under dir1 by a hard link to it.
func linkShared(t *testing.T, dir1, dir2 string) {
	t.Helper()
	err := filepath.WalkDir(dir2, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".sst") {
			return err
		}
		rel, _ := filepath.Rel(dir2, p)
		old := filepath.Join(dir1, rel)
		a, err1 := os.ReadFile(old)
		b, err2 := os.ReadFile(p)
		if err1 != nil || err2 != nil || string(a) != string(b) {
			return nil
		}
		if err := os.Remove(p); err != nil {
			return err
		}
		return os.Link(old, p)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// holdingReader calls hold once, when the reader has produced at least
// after bytes.
type holdingReader struct {
	r     io.Reader
	n     int64
	after int64
	once  sync.Once
	hold  func()
}

func (h *holdingReader) Read(p []byte) (int, error) {
	if h.n >= h.after {
		h.once.Do(h.hold)
	}
	n, err := h.r.Read(p)
	h.n += int64(n)
	return n, err
}

// TestBlobStorageSaveFailsWhenMinIODiesMidUpload kills a dedicated MinIO
// while a Save is in the middle of the multipart upload of a large state
// file, and restarts it: the Save fails, the previous checkpoint still
// restores, a new Save succeeds, and GC leaves no incomplete multipart
// upload behind.
func TestBlobStorageSaveFailsWhenMinIODiesMidUpload(t *testing.T) {
	ctx := t.Context()
	srv := miniotest.Start(t)
	bucket := srv.NewBucket(t)
	raw, err := s3store.New(ctx, s3store.Options{
		Bucket: bucket, Endpoint: srv.Endpoint, Region: srv.Region, PathStyle: true,
		AccessKey: srv.AccessKey, SecretKey: srv.SecretKey,
		PartSize: s3store.MinPartSize, Concurrency: 2,
		MaxAttempts: 2, // fail fast while the server is down
	})
	if err != nil {
		t.Fatal(err)
	}
	// wrap, once set, wraps the body of every Put. The Interceptor keeps
	// raw's AbortIncompleteUploads, which GC looks for, reachable (Unwrap).
	var wrap atomic.Pointer[func(key string, r io.Reader) io.Reader]
	bs := blobstoretest.Intercept(raw, blobstoretest.Hooks{
		Before: func(_ context.Context, c *blobstoretest.Call) error {
			if w := wrap.Load(); w != nil && c.Op == blobstore.OpPut {
				c.Body = (*w)(c.Key, c.Body)
			}
			return nil
		},
	})
	// Grace of a nanosecond: GC aborts every incomplete upload it finds.
	w := acquiredWriter(t, bs, blobstorage.Options{Grace: time.Nanosecond})

	id1, id2 := checkpoint.NewID(1), checkpoint.NewID(2)
	if err := w.Save(ctx, completedRecord(id1, writeState(t, w.StateDir(id1)))); err != nil {
		t.Fatalf("Save(%s): %v", id1, err)
	}
	// writeState's op-0/000001.sst is 12 MiB: three 5 MiB parts.
	d2 := completedRecord(id2, writeState(t, w.StateDir(id2)))
	bigKey := fmt.Sprintf("shared/op-0/%s-e%d/000001.sst", id2, w.Epoch())

	reached, resume := make(chan struct{}), make(chan struct{})
	hold := func(key string, r io.Reader) io.Reader {
		if key != bigKey {
			return r
		}
		// Hold the upload once the first part has been read, so that the
		// server dies with the multipart upload created and a part sent.
		return &holdingReader{r: r, after: s3store.MinPartSize + 1, hold: func() {
			// Give the multipart upload time to be created and its
			// first part time to be sent.
			time.Sleep(500 * time.Millisecond)
			close(reached)
			<-resume
		}}
	}
	wrap.Store(&hold)
	saveErr := make(chan error, 1)
	go func() { saveErr <- w.Save(ctx, d2) }()
	select {
	case <-reached:
	case err := <-saveErr:
		t.Fatalf("Save(%s) returned %v before reaching the second part of %s", id2, err, bigKey)
	case <-time.After(2 * time.Minute):
		t.Fatalf("Save(%s) never reached the second part of %s", id2, bigKey)
	}
	srv.Kill(t)
	close(resume)
	select {
	case err := <-saveErr:
		if err == nil {
			t.Fatalf("Save(%s) succeeded with the server killed in the middle of its upload", id2)
		}
		t.Logf("Save with the server down: %v", err)
	case <-time.After(3 * time.Minute):
		t.Fatalf("Save(%s) did not return within 3 minutes of the server dying", id2)
	}
	wrap.Store(nil)
	srv.Restart(t)

	if got := latestCompletedID(t, bs); got != id1 {
		t.Fatalf("after the failed Save, latest completed = %q, want %s", got, id1)
	}
	sameTree(t, w.StateDir(id1), restoreOnEmptyNode(t, bs, id1))

	if err := w.Save(ctx, d2); err != nil {
		t.Fatalf("Save(%s) after the restart: %v", id2, err)
	}
	sameTree(t, w.StateDir(id2), restoreOnEmptyNode(t, bs, id2))

	rep, err := w.GC(ctx, blobstorage.GCOptions{Now: time.Now().Add(2 * time.Hour)})
	if err != nil {
		t.Fatalf("GC: %v", err)
	}
	t.Logf("GC: %+v", rep)
	if rep.AbortedUploads == 0 {
		t.Errorf("GC aborted no multipart upload; the interrupted upload of %s should have been left pending", bigKey)
	}
	// MinIO lists multipart uploads by whole keys only (see s3store), so
	// ask for the key of the interrupted upload as well as for all.
	client := srv.S3Client(t)
	for _, prefix := range []*string{aws.String(bigKey), nil} {
		out, err := client.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket), Prefix: prefix})
		if err != nil {
			t.Fatalf("ListMultipartUploads(%q): %v", aws.ToString(prefix), err)
		}
		for _, u := range out.Uploads {
			t.Errorf("incomplete multipart upload left after GC: %s (started %v); this MinIO lists it only when asked for its whole key, and GC asks by prefix",
				aws.ToString(u.Key), aws.ToTime(u.Initiated))
		}
	}
	if err := w.Verify(ctx, id2); err != nil {
		t.Fatalf("Verify(%s) after GC: %v", id2, err)
	}
}

// TestBlobStorageGCOnMinIOKeepsRetainedCheckpointsRestorable saves
// several checkpoints of real Pebble state, runs GC with Keep=2, and
// checks that every retained checkpoint verifies and restores exactly on
// an empty node, while the dropped ones' records, private files and
// tables no retained checkpoint uses are gone.
func TestBlobStorageGCOnMinIOKeepsRetainedCheckpointsRestorable(t *testing.T) {
	ctx := t.Context()
	srv := miniotest.Shared(t)
	bs := openBucket(t, srv, srv.NewBucket(t))
	w := acquiredWriter(t, bs, blobstorage.Options{Keep: 2})

	live := filepath.Join(t.TempDir(), "live")
	st, err := state.Open(live, pebbleTestOptions)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	owners := []string{"op-0"}
	model := kvModel{}
	snapshots := map[string]kvModel{}
	var ids []string
	save := func(seq uint64) {
		t.Helper()
		// Each round overwrites keys all over the key space, so that the
		// tables of successive flushes overlap and Pebble compacts them.
		writeKeys(t, st, model, owners, seq, 0, 2000, 100)
		id := checkpoint.NewID(seq)
		dirs, err := st.Checkpoint(ctx, w.StateDir(id))
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Save(ctx, completedRecord(id, dirs)); err != nil {
			t.Fatalf("Save(%s): %v", id, err)
		}
		ids = append(ids, id)
		snapshots[id] = model.clone()
	}
	for seq := uint64(1); seq <= 5; seq++ {
		save(seq)
	}
	// Wait until a compaction has removed one of the first checkpoint's
	// tables from the live database, so that later checkpoints no longer
	// share it and GC has a table to delete.
	first, err := w.Files(ctx, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for compacted := false; !compacted; {
		for _, f := range first["op-0"] {
			if strings.HasSuffix(f.Path, ".sst") {
				if _, err := os.Stat(filepath.Join(live, "op-0", f.Path)); errors.Is(err, os.ErrNotExist) {
					compacted = true
				}
			}
		}
		if !compacted && time.Now().After(deadline) {
			t.Fatal("Pebble compacted none of the first checkpoint's tables within a minute")
		}
		time.Sleep(100 * time.Millisecond)
	}
	save(6)
	save(7)

	// Which keys each checkpoint uses.
	uses := map[string][]string{}
	for _, id := range ids {
		files, err := w.Files(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, refs := range files {
			for _, f := range refs {
				uses[id] = append(uses[id], f.Key)
			}
		}
	}
	retained, dropped := ids[len(ids)-2:], ids[:len(ids)-2]
	keep := map[string]bool{}
	for _, id := range retained {
		for _, k := range uses[id] {
			keep[k] = true
		}
	}
	var gone []string
	for _, id := range dropped {
		for _, k := range uses[id] {
			if !keep[k] {
				gone = append(gone, k)
			}
		}
	}
	sharedGone := slices.ContainsFunc(gone, func(k string) bool { return strings.HasPrefix(k, "shared/") })
	if !sharedGone {
		t.Fatalf("no table is used only by the dropped checkpoints %v: the test would not show GC deleting tables", dropped)
	}

	rep, err := w.GC(ctx, blobstorage.GCOptions{Now: time.Now().Add(2 * time.Hour)})
	if err != nil {
		t.Fatalf("GC: %v", err)
	}
	if !slices.Equal(rep.Retained, retained) || !slices.Equal(rep.Dropped, dropped) {
		t.Fatalf("GC retained %v and dropped %v; want %v and %v", rep.Retained, rep.Dropped, retained, dropped)
	}
	if rep.SharedObjects == 0 {
		t.Errorf("GC deleted no shared table: %+v", rep)
	}

	for _, id := range dropped {
		if _, err := w.LoadSpecific(ctx, id); !errors.Is(err, checkpoint.ErrNotFound) {
			t.Errorf("LoadSpecific(%s) after GC = %v, want ErrNotFound", id, err)
		}
		for o, err := range bs.List(ctx, "checkpoints/"+id+"/") {
			if err != nil {
				t.Fatal(err)
			}
			t.Errorf("object of dropped checkpoint %s left: %s", id, o.Key)
		}
	}
	for _, k := range gone {
		if _, err := bs.Stat(ctx, k); !errors.Is(err, blobstore.ErrNotFound) {
			t.Errorf("%s, used only by dropped checkpoints: Stat = %v, want ErrNotFound", k, err)
		}
	}
	for _, id := range retained {
		if err := w.Verify(ctx, id); err != nil {
			t.Errorf("Verify(%s): %v", id, err)
		}
		sameKV(t, "restored "+id, readPebble(t, restoreOnEmptyNode(t, bs, id)), snapshots[id])
	}
	if got := latestCompletedID(t, bs); got != ids[len(ids)-1] {
		t.Fatalf("latest completed after GC = %q, want %s", got, ids[len(ids)-1])
	}
}

// readPointerObject returns the content of a BlobStorage pointer object
// (_latest, _latest-completed): its id and epoch, or zero values when it
// does not exist.
func readPointerObject(t *testing.T, bs blobstore.Blobstore, name string) (id string, epoch uint64) {
	t.Helper()
	rc, err := bs.Get(t.Context(), name)
	if errors.Is(err, blobstore.ErrNotFound) {
		return "", 0
	}
	if err != nil {
		t.Fatalf("Get(%s): %v", name, err)
	}
	defer rc.Close()
	var p struct {
		ID    string `json:"id"`
		Epoch uint64 `json:"epoch"`
	}
	if err := json.NewDecoder(rc).Decode(&p); err != nil {
		t.Fatalf("decode %s: %v", name, err)
	}
	return p.ID, p.Epoch
}
