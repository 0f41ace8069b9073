package integration

import (
	"context"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/integration/miniotest"
	"github.com/tidemark-io/tidemark/s3store"
	"github.com/tidemark-io/tidemark/state"
)

// BenchmarkCheckpoint measures checkpoints of real Pebble state to MinIO:
//
//   - Full: the first checkpoint, into an empty bucket;
//   - Incremental1pct: a checkpoint after 1% of the keys were overwritten
//     (flush, native checkpoint, Save);
//   - Restore: the latest checkpoint downloaded into an empty directory.
//
// Each reports, per operation, the bytes uploaded and downloaded, the
// HTTP requests sent to MinIO (a multipart upload is several), the
// Blobstore calls made, and the wall-clock seconds. The state is
// TIDEMARK_BENCH_STATE_MIB MiB of incompressible values (default 256);
// run it once:
//
//	go test -run '^$' -bench BenchmarkCheckpoint -benchtime=1x ./integration/
//	TIDEMARK_BENCH_STATE_MIB=1024 go test -run '^$' -bench BenchmarkCheckpoint -benchtime=1x -timeout 30m ./integration/
func BenchmarkCheckpoint(b *testing.B) {
	stateMiB := 256
	if s := os.Getenv("TIDEMARK_BENCH_STATE_MIB"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			b.Fatalf("TIDEMARK_BENCH_STATE_MIB=%q: want a positive number of MiB", s)
		}
		stateMiB = n
	}
	const (
		valueSize = 1024
		owners    = 2
	)
	keysPerOwner := uint64(stateMiB) << 20 / valueSize / owners
	ctx := context.Background()

	raw, requests := countedBucket(b, 0)
	store := blobstoretest.Intercept(raw, blobstoretest.Hooks{})

	// Build the state. Values are pseudo-random, so Pebble's block
	// compression gains nothing and the tables are as large as the data.
	ids := make([]string, owners)
	for i := range ids {
		ids[i] = fmt.Sprintf("op-%d", i)
	}
	live := filepath.Join(b.TempDir(), "live")
	st, err := state.Open(live, state.Options{MemTableSize: 64 << 20, CacheSize: 64 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	took := buildBenchState(b, st, live, ids, keysPerOwner, valueSize)
	// Logged by Full: a parent benchmark's log is not printed.
	built := fmt.Sprintf("state: %d owners × %d keys × %d B values written and compacted in %v",
		owners, keysPerOwner, valueSize, took.Round(time.Millisecond))

	// values remembers which value seed last wrote each overwritten key.
	values := map[string]map[uint64]uint64{}
	for _, id := range ids {
		values[id] = map[uint64]uint64{}
	}
	var (
		w      *blobstorage.Storage // the writer of the last Full run
		bs     blobstore.Blobstore  // its store (a prefix of the bucket)
		seq    uint64
		lastID string
	)
	nativeCheckpoint := func(b *testing.B) (*checkpoint.CheckpointData, int64) {
		seq++
		id := checkpoint.NewID(seq)
		dirs, err := st.Checkpoint(ctx, w.StateDir(id))
		if err != nil {
			b.Fatal(err)
		}
		return completedRecord(id, dirs), treeSize(b, w.StateDir(id))
	}
	// measure runs b.N operations: setup(i) prepares one (untimed) and
	// returns it; only the operation is timed and counted.
	measure := func(b *testing.B, setup func(i int) func()) {
		b.Helper()
		b.StopTimer()
		var took time.Duration
		var c blobCounts
		var reqs int64
		var kinds [numKinds]int64
		for i := range b.N {
			op := setup(i)
			before, req0, kinds0, t0 := counts(store), requests.n.Load(), requests.snapshot(), time.Now()
			b.StartTimer()
			op()
			b.StopTimer()
			took += time.Since(t0)
			c = c.add(counts(store).sub(before))
			reqs += requests.n.Load() - req0
			for k, n := range requests.snapshot() {
				kinds[k] += n - kinds0[k]
			}
		}
		n := float64(b.N)
		b.ReportMetric(float64(c.up)/(1<<20)/n, "upload-MiB")
		b.ReportMetric(float64(c.down)/(1<<20)/n, "download-MiB")
		b.ReportMetric(float64(reqs)/n, "requests")
		b.ReportMetric(float64(c.ops())/n, "blob-ops")
		b.ReportMetric(took.Seconds()/n, "s")
		b.Logf("per op: %s", c.div(b.N))
		// The request bill of one operation, by kind; a LIST on the save
		// or restore path would cost a round trip per 1000 keys and
		// depend on the store's listing consistency.
		var bill []string
		for k, name := range kindNames {
			if k == kindOther && kinds[k] == 0 {
				continue
			}
			b.ReportMetric(float64(kinds[k])/n, name)
			bill = append(bill, fmt.Sprintf("%s %.1f", name, float64(kinds[k])/n))
		}
		b.Logf("HTTP requests per op: %s", strings.Join(bill, ", "))
	}

	b.Run("Full", func(b *testing.B) {
		b.Log(built)
		var d *checkpoint.CheckpointData
		var size int64
		measure(b, func(i int) func() {
			// A fresh prefix and writer: nothing of the state is in the
			// store yet, and nothing is remembered.
			bs, err = blobstore.WithPrefix(store, fmt.Sprintf("full-%d", i))
			if err != nil {
				b.Fatal(err)
			}
			w = blobstorage.New(bs, b.TempDir(), blobstorage.Options{})
			if _, err := w.Acquire(ctx); err != nil {
				b.Fatal(err)
			}
			seq = 0
			d, size = nativeCheckpoint(b)
			return func() {
				if err := w.Save(ctx, d); err != nil {
					b.Fatalf("Save(%s): %v", d.ID, err)
				}
			}
		})
		lastID = d.ID
		b.ReportMetric(float64(size)/(1<<20), "state-MiB")
	})
	if w == nil {
		b.Fatal("Full did not run")
	}

	b.Run("Incremental1pct", func(b *testing.B) {
		var native time.Duration
		measure(b, func(i int) func() {
			// Overwrite 1% of each owner's keys, picked at random, with
			// values of a new seed.
			rng := rand.New(rand.NewPCG(uint64(i), 42))
			valueSeed := uint64(100 + i)
			for _, id := range ids {
				o, err := st.Owner(id)
				if err != nil {
					b.Fatal(err)
				}
				err = o.Apply(func(batch *state.Batch) error {
					for range keysPerOwner / 100 {
						k := rng.Uint64N(keysPerOwner)
						values[id][k] = valueSeed
						if err := batch.Set(stateKey(id, k), stateValue(id, valueSeed, k, valueSize)); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			t0 := time.Now()
			d, _ := nativeCheckpoint(b) // flushes the memtables first
			native += time.Since(t0)
			return func() {
				if err := w.Save(ctx, d); err != nil {
					b.Fatalf("Save(%s): %v", d.ID, err)
				}
				lastID = d.ID
			}
		})
		b.ReportMetric(native.Seconds()/float64(b.N), "native-s")
	})

	b.Run("Restore", func(b *testing.B) {
		var node *blobstorage.Storage
		measure(b, func(int) func() {
			node = blobstorage.New(bs, b.TempDir(), blobstorage.Options{})
			return func() {
				if err := node.Restore(ctx, lastID); err != nil {
					b.Fatalf("Restore(%s): %v", lastID, err)
				}
			}
		})
		// Restore checked every file's digest; check some keys too, the
		// overwritten ones among them.
		spotCheck(b, node.StateDir(lastID), ids, keysPerOwner, valueSize, values)
	})
}

// spotCheck opens the restored state and compares 2000 keys per owner,
// half of them among the overwritten ones, with what was written.
func spotCheck(b *testing.B, stateDir string, ids []string, keysPerOwner uint64, valueSize int, values map[string]map[uint64]uint64) {
	b.Helper()
	st, err := state.OpenCheckpoint(context.Background(), stateDir, filepath.Join(b.TempDir(), "work"), state.Options{})
	if err != nil {
		b.Fatalf("OpenCheckpoint: %v", err)
	}
	defer st.Close()
	rng := rand.New(rand.NewPCG(7, 7))
	for _, id := range ids {
		o, err := st.Owner(id)
		if err != nil {
			b.Fatal(err)
		}
		changed := slices.Collect(maps.Keys(values[id]))
		for j := range 2000 {
			k := rng.Uint64N(keysPerOwner)
			if j%2 == 1 && len(changed) > 0 {
				k = changed[rng.IntN(len(changed))]
			}
			seed := uint64(1)
			if s, ok := values[id][k]; ok {
				seed = s
			}
			got, ok, err := o.Get(stateKey(id, k))
			if err != nil || !ok || string(got) != string(stateValue(id, seed, k, valueSize)) {
				b.Fatalf("restored owner %q key %d: present=%v err=%v, value differs from what was written", id, k, ok, err)
			}
		}
	}
}

// treeSize returns the total size of the regular files under root.
func treeSize(b *testing.B, root string) int64 {
	b.Helper()
	var n int64
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		n += fi.Size()
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// benchTransport is an HTTP transport with enough idle connections for
// the parallel uploads of a checkpoint (the default keeps two per host).
func benchTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 256
	t.MaxIdleConnsPerHost = 256
	return t
}

// countingTransport counts the HTTP requests sent, in total and by the
// kind of S3 request.
type countingTransport struct {
	base  http.RoundTripper
	n     atomic.Int64
	kinds [numKinds]atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	c.kinds[s3RequestKind(r)].Add(1)
	return c.base.RoundTrip(r)
}

// The kinds of S3 request the benchmark reports, as a bill would list
// them (see s3RequestKind): PUT (PutObject, UploadPart), POST (Create and
// CompleteMultipartUpload), GET (GetObject, ranged or not), HEAD
// (HeadObject), LIST (ListObjectsV2, ListMultipartUploads, ListParts) and
// DELETE (DeleteObject, AbortMultipartUpload, DeleteObjects).
const (
	kindPut = iota
	kindPost
	kindGet
	kindHead
	kindList
	kindDelete
	kindOther
	numKinds
)

var kindNames = [numKinds]string{"PUT", "POST", "GET", "HEAD", "LIST", "DELETE", "other"}

// s3RequestKind classifies a path-style S3 request (/bucket or /bucket/key).
func s3RequestKind(r *http.Request) int {
	q := r.URL.Query()
	onBucket := !strings.Contains(strings.Trim(r.URL.Path, "/"), "/")
	switch r.Method {
	case http.MethodPut:
		return kindPut
	case http.MethodPost:
		if q.Has("delete") {
			return kindDelete
		}
		return kindPost
	case http.MethodGet:
		if onBucket || q.Has("uploadId") || q.Has("list-type") {
			return kindList
		}
		return kindGet
	case http.MethodHead:
		return kindHead
	case http.MethodDelete:
		return kindDelete
	}
	return kindOther
}

// snapshot returns the requests counted so far by kind.
func (c *countingTransport) snapshot() [numKinds]int64 {
	var s [numKinds]int64
	for i := range s {
		s[i] = c.kinds[i].Load()
	}
	return s
}

// blobCounts are the calls made through an Interceptor and the bytes
// they moved.
type blobCounts struct {
	put, get, stat, list, del int64 // calls (Put* are put, GetRange is get, Exists is stat)
	up, down                  int64 // bytes read from Put* readers, bytes read from Get* bodies
}

func (c blobCounts) ops() int64 { return c.put + c.get + c.stat + c.list + c.del }

func (c blobCounts) add(o blobCounts) blobCounts {
	return blobCounts{c.put + o.put, c.get + o.get, c.stat + o.stat, c.list + o.list, c.del + o.del, c.up + o.up, c.down + o.down}
}

func (c blobCounts) sub(o blobCounts) blobCounts {
	return blobCounts{c.put - o.put, c.get - o.get, c.stat - o.stat, c.list - o.list, c.del - o.del, c.up - o.up, c.down - o.down}
}

func (c blobCounts) div(n int) string {
	d := int64(n)
	return fmt.Sprintf("put %d get %d stat %d list %d delete %d; up %.1f MiB, down %.1f MiB",
		c.put/d, c.get/d, c.stat/d, c.list/d, c.del/d, float64(c.up/d)/(1<<20), float64(c.down/d)/(1<<20))
}

// counts returns the calls made through i and the bytes they moved (Put*
// are put, GetRange is get, Exists is stat).
func counts(i *blobstoretest.Interceptor) blobCounts {
	up, down := i.Bytes()
	n := func(ops ...blobstore.Op) int64 { return int64(i.Count(ops...)) }
	return blobCounts{
		put: n(blobstore.OpPut, blobstore.OpPutIfAbsent, blobstore.OpPutIfMatch),
		get: n(blobstore.OpGet, blobstore.OpGetRange), stat: n(blobstore.OpStat, blobstore.OpExists),
		list: n(blobstore.OpList), del: n(blobstore.OpDelete), up: up, down: down,
	}
}

// TestSaveAndRestoreSendNoListRequests: a full checkpoint, an incremental
// one (one file changed, the rest hard-linked) and a restore on an empty
// node send no LIST request, which would cost a round trip per 1000 keys
// and depend on the store's listing; GC is the one caller of List. The
// bill of each is logged.
func TestSaveAndRestoreSendNoListRequests(t *testing.T) {
	ctx := t.Context()
	bs, requests := countedBucket(t, s3store.MinPartSize)
	w := acquiredWriter(t, bs, blobstorage.Options{})
	bill := func(what string, op func()) {
		t.Helper()
		before := requests.snapshot()
		op()
		var parts []string
		after := requests.snapshot()
		for k, name := range kindNames {
			parts = append(parts, fmt.Sprintf("%s %d", name, after[k]-before[k]))
		}
		t.Logf("%s: %s", what, strings.Join(parts, ", "))
		if n := after[kindList] - before[kindList]; n != 0 {
			t.Errorf("%s sent %d LIST requests, want none", what, n)
		}
		if n := after[kindOther] - before[kindOther]; n != 0 {
			t.Errorf("%s sent %d requests of no known kind", what, n)
		}
	}
	id1, id2 := checkpoint.NewID(1), checkpoint.NewID(2)
	dirs := writeState(t, w.StateDir(id1)) // one file of three parts
	bill("full checkpoint", func() {
		if err := w.Save(ctx, completedRecord(id1, dirs)); err != nil {
			t.Fatal(err)
		}
	})
	// The next checkpoint hard-links the tables, as Pebble does, and
	// rewrites the rest.
	err := filepath.WalkDir(w.StateDir(id1), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(w.StateDir(id1), p)
		to := filepath.Join(w.StateDir(id2), rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o755)
		case strings.HasSuffix(p, ".sst"):
			return os.Link(p, to)
		}
		return os.WriteFile(to, []byte("rewritten for "+id2), 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	bill("incremental checkpoint", func() {
		if err := w.Save(ctx, completedRecord(id2, dirs)); err != nil {
			t.Fatal(err)
		}
	})
	node := blobstorage.New(bs, t.TempDir(), blobstorage.Options{})
	bill("restore on an empty node", func() {
		if err := node.Restore(ctx, id2); err != nil {
			t.Fatal(err)
		}
	})
	sameTree(t, w.StateDir(id2), node.StateDir(id2))
	// The control: GC lists, and the counter sees it.
	before := requests.snapshot()[kindList]
	if _, err := w.GC(ctx, blobstorage.GCOptions{}); err != nil {
		t.Fatal(err)
	}
	if requests.snapshot()[kindList] == before {
		t.Fatal("GC sent no LIST request that the counter saw: the counter cannot see LISTs")
	}
}

// BenchmarkRestoreFiles measures Restore of a checkpoint of
// TIDEMARK_BENCH_FILES files (default 256) of TIDEMARK_BENCH_FILE_MIB MiB
// (default 4) from MinIO into an empty directory, as the peer benchmark's
// restore row does, and reports where the CPU goes: this process's CPU
// seconds (user and system) and, on a process-mode server, MinIO's. Run
// it with a CPU profile to split the client's share:
//
//	TIDEMARK_MINIO=process go test -run '^$' -bench BenchmarkRestoreFiles -benchtime 5x -cpuprofile restore.pprof ./integration/
//	go tool pprof -top integration.test restore.pprof
func BenchmarkRestoreFiles(b *testing.B) {
	files, fileMiB := envInt(b, "TIDEMARK_BENCH_FILES", 256), envInt(b, "TIDEMARK_BENCH_FILE_MIB", 4)
	ctx := context.Background()
	srv := miniotest.Shared(b) // its CPU time is measured too
	bs, _ := countedBucket(b, 0)
	w := blobstorage.New(bs, b.TempDir(), blobstorage.Options{})
	if _, err := w.Acquire(ctx); err != nil {
		b.Fatal(err)
	}
	id := checkpoint.NewID(1)
	dir := filepath.Join(w.StateDir(id), "op-0")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	for i := range files {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%06d.sst", i+1)), blobstoretest.Payload(uint64(i), int64(fileMiB)<<20), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Save(ctx, completedRecord(id, map[string]string{"op-0": "op-0"})); err != nil {
		b.Fatal(err)
	}
	var wall time.Duration
	var self, server cpuTimes
	for b.Loop() {
		b.StopTimer()
		node := blobstorage.New(bs, b.TempDir(), blobstorage.Options{})
		self0, server0 := processCPU(b, os.Getpid()), processCPU(b, srv.PID())
		t0 := time.Now()
		b.StartTimer()
		if err := node.Restore(ctx, id); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		wall += time.Since(t0)
		self = self.add(processCPU(b, os.Getpid()).sub(self0))
		server = server.add(processCPU(b, srv.PID()).sub(server0))
		b.StartTimer()
	}
	n := float64(b.N)
	mb := float64(files*fileMiB<<20) / 1e6
	b.ReportMetric(mb/(wall.Seconds()/n), "MB/s")
	b.ReportMetric(self.user/n, "client-user-s")
	b.ReportMetric(self.sys/n, "client-sys-s")
	if srv.PID() != 0 {
		b.ReportMetric((server.user+server.sys)/n, "minio-cpu-s")
	}
	b.Logf("%d × %d MiB: wall %.3fs, client CPU %.3fs user + %.3fs sys, MinIO CPU %.3fs (pid %d; 0 unless TIDEMARK_MINIO=process)",
		files, fileMiB, wall.Seconds()/n, self.user/n, self.sys/n, (server.user+server.sys)/n, srv.PID())
}

func envInt(b *testing.B, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive number", name, s)
	}
	return n
}

// cpuTimes are a process's user and system CPU seconds.
type cpuTimes struct{ user, sys float64 }

func (c cpuTimes) add(o cpuTimes) cpuTimes { return cpuTimes{c.user + o.user, c.sys + o.sys} }
func (c cpuTimes) sub(o cpuTimes) cpuTimes { return cpuTimes{c.user - o.user, c.sys - o.sys} }

// processCPU reads utime and stime of pid from /proc (Linux; zero for pid
// 0 or elsewhere), in seconds at the usual 100 ticks per second.
func processCPU(b *testing.B, pid int) cpuTimes {
	if pid == 0 {
		return cpuTimes{}
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return cpuTimes{}
	}
	// Fields after the command name, which is in parentheses and may
	// hold spaces: state is field 3, utime 14, stime 15.
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	if len(f) < 13 {
		b.Fatalf("/proc/%d/stat: %q", pid, raw)
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return cpuTimes{ut / 100, st / 100}
}

// countedBucket opens an s3store.Store on a fresh bucket of the shared
// MinIO whose HTTP requests are counted (partSize 0: the default).
func countedBucket(tb testing.TB, partSize int64) (*s3store.Store, *countingTransport) {
	tb.Helper()
	srv := miniotest.Shared(tb)
	return openCountedBucket(tb, srv, srv.NewBucket(tb), partSize)
}

// openCountedBucket opens bucket of srv with its HTTP requests counted.
func openCountedBucket(tb testing.TB, srv *miniotest.Server, bucket string, partSize int64) (*s3store.Store, *countingTransport) {
	tb.Helper()
	requests := &countingTransport{base: benchTransport()}
	bs, err := s3store.New(tb.Context(), s3store.Options{
		Bucket: bucket, Endpoint: srv.Endpoint, Region: srv.Region, PathStyle: true,
		AccessKey: srv.AccessKey, SecretKey: srv.SecretKey, PartSize: partSize,
		HTTPClient: &http.Client{Transport: requests},
	})
	if err != nil {
		tb.Fatal(err)
	}
	return bs, requests
}
