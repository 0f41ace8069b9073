package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/state"
)

// BenchmarkInstantRestore compares restoring real Pebble state on an
// empty node from MinIO in three modes:
//
//   - local: today's restore (blobstorage.Storage downloads every
//     file, then the state opens);
//   - remote-all: state in remote mode with every SST in the store; the
//     restore downloads the local part (MANIFEST, OPTIONS, WAL, catalog)
//     and reads blocks on demand;
//   - remote-lower: remote mode with only L5 and L6 in the store.
//
// For each state size (TIDEMARK_BENCH_INSTANT_MIB, comma-separated MiB,
// default "256,1024") and mode it builds the state (two owners, 1 KiB
// incompressible values, compacted), takes and saves a full checkpoint,
// then measures, per operation:
//
//   - first-read-s (median of TIDEMARK_BENCH_INSTANT_RESTORES restores,
//     default 3; first-read-max-s the slowest): from the start of the
//     restore to the first correct value read, ns/op is their sum; it is
//     download-s (BlobStorage.Restore: the record and the local files) +
//     open-s (OpenCheckpoint and opening every owner) + get-s (one Get
//     per owner), each a median;
//   - restore-down-MiB: bytes downloaded until then;
//   - cold-reads/s: 1000 random Gets per owner right after the first
//     read; hydrate-s: Store.Hydrate then reading the whole state;
//     hydrated-reads/s: 1000 other random Gets per owner after it (the
//     secondary cache is twice an owner's share of the state);
//
// and once, outside the timer: the full checkpoint's upload
// (ckpt-up-MiB: what Save uploaded; pebble-up-MiB: what Pebble wrote into
// the store while building the state) and an incremental one after 1% of
// the keys were overwritten (incr-up-MiB: Save plus Pebble uploads from
// the overwrite to quiet compactions and a second checkpoint;
// incr-requests: HTTP requests in that window).
//
//	go test -run '^$' -bench BenchmarkInstantRestore -benchtime=1x -timeout 60m ./integration/
//	TIDEMARK_BENCH_INSTANT_MIB=1024,4096 go test -run '^$' -bench BenchmarkInstantRestore -benchtime=1x -timeout 120m ./integration/
func BenchmarkInstantRestore(b *testing.B) {
	sizes := []int{256, 1024}
	if s := os.Getenv("TIDEMARK_BENCH_INSTANT_MIB"); s != "" {
		sizes = nil
		for f := range strings.SplitSeq(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n <= 0 {
				b.Fatalf("TIDEMARK_BENCH_INSTANT_MIB=%q: want comma-separated positive numbers of MiB", s)
			}
			sizes = append(sizes, n)
		}
	}
	modes := []struct {
		name   string
		remote bool
		levels state.RemoteLevels
	}{
		{"local", false, 0},
		{"remote-all", true, state.RemoteAllLevels},
		{"remote-lower", true, state.RemoteLowerLevels},
	}
	for _, mib := range sizes {
		for _, m := range modes {
			b.Run(fmt.Sprintf("%dMiB/%s", mib, m.name), func(b *testing.B) {
				benchInstant(b, mib, m.remote, m.levels)
			})
		}
	}
}

func benchInstant(b *testing.B, stateMiB int, remoteMode bool, levels state.RemoteLevels) {
	const (
		valueSize = 1024
		owners    = 2
	)
	ids := []string{"op-0", "op-1"}
	keysPerOwner := uint64(stateMiB) << 20 / valueSize / owners
	ctx := context.Background()

	raw, requests := countedBucket(b, 0)
	// Pebble's objects and the checkpoint layer's files are counted apart.
	pebbleStore := &countingStore{Blobstore: raw}
	ckptCounts := &countingStore{Blobstore: raw}
	ckpt, err := blobstore.WithPrefix(ckptCounts, "ckpt")
	if err != nil {
		b.Fatal(err)
	}
	// Pebble's objects live in the Storage's own store (its view counted
	// apart), under blobstorage.RemotePrefix, where the checkpoints own them.
	pebbleView, err := blobstore.WithPrefix(pebbleStore, "ckpt")
	if err != nil {
		b.Fatal(err)
	}
	options := func(gen string) state.Options {
		o := state.Options{MemTableSize: 64 << 20, CacheSize: 64 << 20}
		if remoteMode {
			// A secondary cache twice an owner's share of the state, so
			// that a hydrated owner is served from local disk.
			o.Remote = state.RemoteOptions{Store: pebbleView, Prefix: blobstorage.RemotePrefix, Generation: gen, Levels: levels, CacheSize: int64(stateMiB) << 20}
		}
		return o
	}

	// Build the state and save a full checkpoint.
	w := blobstorage.New(ckpt, b.TempDir(), blobstorage.Options{})
	if _, err := w.Acquire(ctx); err != nil {
		b.Fatal(err)
	}
	live := filepath.Join(b.TempDir(), "live")
	st, err := state.Open(live, options("e1"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	w.UseRemote(st.CheckpointRemote())
	start := time.Now()
	writeKeys(b, st, nil, ids, 1, 0, keysPerOwner, valueSize)
	for _, id := range ids {
		o, _ := st.Owner(id)
		if err := o.Flush(); err != nil {
			b.Fatal(err)
		}
	}
	waitStateQuiet(b, st, live)
	built := time.Since(start)
	var seq uint64
	save := func() (string, []state.RemoteObject) {
		seq++
		id := checkpoint.NewID(seq)
		dirs, err := st.Checkpoint(ctx, w.StateDir(id))
		if err != nil {
			b.Fatal(err)
		}
		objs, err := st.RemoteObjects(ctx, w.StateDir(id))
		if err != nil {
			b.Fatal(err)
		}
		if err := w.Save(ctx, completedRecord(id, dirs)); err != nil {
			b.Fatalf("Save(%s): %v", id, err)
		}
		return id, objs
	}
	pebbleBuilt := pebbleStore.snapshot()
	ck0 := ckptCounts.snapshot()
	_, objs := save()
	full := ckptCounts.snapshot().sub(ck0)
	var remoteBytes int64
	for _, o := range objs {
		remoteBytes += o.Size
	}
	b.Logf("state: %d owners × %d keys × %d B built in %v; full checkpoint: Save %s; %d remote objects, %.1f MiB, referenced instead of uploaded",
		owners, keysPerOwner, valueSize, built.Round(time.Millisecond), full.div(1), len(objs), float64(remoteBytes)/(1<<20))

	// An incremental checkpoint after 1% of the keys changed, counted
	// until compactions are quiet and a second checkpoint has been saved,
	// so that compaction output is charged in both modes (local mode
	// uploads it with the next checkpoint, remote mode as it is written).
	rng := rand.New(rand.NewPCG(1, 2))
	ck0, pb0, req0 := ckptCounts.snapshot(), pebbleStore.snapshot(), requests.n.Load()
	for _, oid := range ids {
		o, _ := st.Owner(oid)
		err := o.Apply(func(batch *state.Batch) error {
			for range keysPerOwner / 100 {
				k := rng.Uint64N(keysPerOwner)
				if err := batch.Set(stateKey(oid, k), stateValue(oid, 2, k, valueSize)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	save()
	waitStateQuiet(b, st, live)
	id, _ := save()
	incrSave, incrPebble := ckptCounts.snapshot().sub(ck0), pebbleStore.snapshot().sub(pb0)
	incrRequests := requests.n.Load() - req0
	b.Logf("1%% overwritten, two checkpoints: Save %s; Pebble %s; %d HTTP requests", incrSave.div(1), incrPebble.div(1), incrRequests)

	// The values of the checkpoint restored: seed 1, or 2 where
	// overwritten. The restore reads keys through Get, so the check only
	// needs to know which seed each key has: replay the same choices.
	overwritten := map[string]map[uint64]bool{}
	rng = rand.New(rand.NewPCG(1, 2))
	for _, oid := range ids {
		overwritten[oid] = map[uint64]bool{}
		for range keysPerOwner / 100 {
			overwritten[oid][rng.Uint64N(keysPerOwner)] = true
		}
	}
	want := func(oid string, k uint64) string {
		seed := uint64(1)
		if overwritten[oid][k] {
			seed = 2
		}
		return string(stateValue(oid, seed, k, valueSize))
	}

	// Restores on an empty node, timed to the first correct read; each
	// operation restores three times and reports the median, since one
	// restore takes a fraction of a second on a machine shared with
	// others.
	restores := 3
	if s := os.Getenv("TIDEMARK_BENCH_INSTANT_RESTORES"); s != "" {
		if restores, err = strconv.Atoi(s); err != nil || restores <= 0 {
			b.Fatalf("TIDEMARK_BENCH_INSTANT_RESTORES=%q: want a positive number", s)
		}
	}
	b.ResetTimer()
	b.StopTimer()
	var firstReads, downloads, opens, gets []time.Duration
	var cold, hydrate, hydrated time.Duration
	var down int64
	reads := 0
	for i := range b.N * restores {
		root := b.TempDir()
		node := blobstorage.New(ckpt, filepath.Join(root, "node"), blobstorage.Options{})
		work := filepath.Join(root, "work")
		d0, p0 := ckptCounts.snapshot(), pebbleStore.snapshot()
		t0 := time.Now()
		b.StartTimer()
		if err := node.Restore(ctx, id); err != nil {
			b.Fatalf("Restore(%s): %v", id, err)
		}
		tOpen := time.Now()
		rs, err := state.OpenCheckpoint(ctx, node.StateDir(id), work, options(fmt.Sprintf("e%d", 2+i)))
		if err != nil {
			b.Fatal(err)
		}
		for _, oid := range ids {
			if _, err := rs.Owner(oid); err != nil {
				b.Fatal(err)
			}
		}
		tGet := time.Now()
		for _, oid := range ids {
			o, err := rs.Owner(oid)
			if err != nil {
				b.Fatal(err)
			}
			k := uint64(i) % keysPerOwner
			got, ok, err := o.Get(stateKey(oid, k))
			if err != nil || !ok || string(got) != want(oid, k) {
				b.Fatalf("first read of owner %q key %d: present=%v err=%v, or the value differs", oid, k, ok, err)
			}
		}
		b.StopTimer()
		firstReads = append(firstReads, time.Since(t0))
		downloads = append(downloads, tOpen.Sub(t0))
		opens = append(opens, tGet.Sub(tOpen))
		gets = append(gets, time.Since(tGet))
		down += ckptCounts.snapshot().sub(d0).down + pebbleStore.snapshot().sub(p0).down

		// Random point reads on the cold state, then a hydration, then
		// other random reads.
		readRandom := func() time.Duration {
			t := time.Now()
			for _, oid := range ids {
				o, _ := rs.Owner(oid)
				for range 1000 {
					k := rand.Uint64N(keysPerOwner)
					got, ok, err := o.Get(stateKey(oid, k))
					if err != nil || !ok || string(got) != want(oid, k) {
						b.Fatalf("read of owner %q key %d: present=%v err=%v, or the value differs", oid, k, ok, err)
					}
				}
			}
			return time.Since(t)
		}
		cold += readRandom()
		t1 := time.Now()
		if err := rs.Hydrate(ctx); err != nil {
			b.Fatal(err)
		}
		hydrate += time.Since(t1)
		hydrated += readRandom()
		reads += 1000 * len(ids)
		if err := rs.Close(); err != nil {
			b.Fatal(err)
		}
		if err := os.RemoveAll(root); err != nil {
			b.Fatal(err)
		}
	}
	n := float64(b.N * restores)
	median := func(ds []time.Duration) float64 {
		slices.Sort(ds)
		return ds[len(ds)/2].Seconds()
	}
	b.ReportMetric(median(firstReads), "first-read-s")
	b.ReportMetric(firstReads[len(firstReads)-1].Seconds(), "first-read-max-s")
	b.ReportMetric(median(downloads), "download-s")
	b.ReportMetric(median(opens), "open-s")
	b.ReportMetric(median(gets), "get-s")
	b.ReportMetric(float64(down)/(1<<20)/n, "restore-down-MiB")
	b.ReportMetric(float64(reads)/cold.Seconds(), "cold-reads/s")
	b.ReportMetric(hydrate.Seconds()/n, "hydrate-s")
	b.ReportMetric(float64(reads)/hydrated.Seconds(), "hydrated-reads/s")
	b.ReportMetric(float64(full.up)/(1<<20), "ckpt-up-MiB")
	b.ReportMetric(float64(pebbleBuilt.up)/(1<<20), "pebble-up-MiB")
	b.ReportMetric(float64(incrSave.up+incrPebble.up)/(1<<20), "incr-up-MiB")
	b.ReportMetric(float64(incrRequests), "incr-requests")
}

// waitStateQuiet waits until neither the local tables under dir nor the
// remote objects st refers to have changed for three seconds: Pebble
// compacts in the background after a bulk load.
func waitStateQuiet(b *testing.B, st *state.Store, dir string) {
	b.Helper()
	deadline := time.Now().Add(10 * time.Minute)
	var prev []string
	for stable := 0; stable < 3; {
		if time.Now().After(deadline) {
			b.Fatal("Pebble still compacting after 10 minutes")
		}
		// Glob, not ListFiles: a table deleted mid-walk is not an error.
		cur, err := filepath.Glob(filepath.Join(dir, "*", "*.sst"))
		if err != nil {
			b.Fatal(err)
		}
		objs, err := st.LiveRemoteObjects()
		if err != nil {
			b.Fatal(err)
		}
		for _, o := range objs {
			cur = append(cur, o.Key)
		}
		slices.Sort(cur)
		if slices.Equal(cur, prev) {
			stable++
		} else {
			stable = 0
		}
		prev = cur
		time.Sleep(time.Second)
	}
}
