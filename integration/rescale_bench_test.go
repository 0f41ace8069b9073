package integration

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/state"
)

// BenchmarkRescale measures a rescale of a job of four owners on MinIO,
// 4 → 2 workers and then 2 → 4, with the state local (today's rescale: a
// worker downloads the owners it gains) and in remote mode (a worker opens
// them in place, Worker.UseRemote). For each it prints the time from the
// resumed workers' start (empty disks) to the first record processed by
// all of them (one key read and checked per owner), and the bytes
// downloaded before it. The state is TIDEMARK_BENCH_STATE_MIB MiB
// (default 256) of incompressible values:
//
//	TIDEMARK_MINIO=process TIDEMARK_BENCH_STATE_MIB=4096 go test -run '^$' -bench BenchmarkRescale -benchtime=1x -timeout 60m ./integration/
func BenchmarkRescale(b *testing.B) {
	stateMiB := envInt(b, "TIDEMARK_BENCH_STATE_MIB", 256)
	const valueSize = 1024
	owners := []string{"op-0", "op-1", "op-2", "op-3"}
	keysPerOwner := uint64(stateMiB) << 20 / valueSize / uint64(len(owners))
	var lines []string
	for _, remote := range []bool{false, true} {
		mode := "local (download)"
		if remote {
			mode = "remote (in place)"
		}
		raw, _ := countedBucket(b, 0)
		bs := blobstoretest.Intercept(raw, blobstoretest.Hooks{})
		w := blobstorage.New(bs, b.TempDir(), blobstorage.Options{})
		if _, err := w.Acquire(b.Context()); err != nil {
			b.Fatal(err)
		}
		var four []*rescaleWorker
		t0 := time.Now()
		for i, o := range owners {
			rw := startRescaleWorker(b, bs, w.Epoch(), remote, fmt.Sprint("w", i), "", []string{o})
			buildBenchState(b, rw.st, rw.live, rw.owners, keysPerOwner, valueSize)
			four = append(four, rw)
		}
		id1 := checkpointByParts(b, w, four, 1)
		b.Logf("%s: %d MiB built and checkpointed by 4 workers in %v", mode, stateMiB, time.Since(t0).Round(time.Second))
		closeWorkers(four)

		down0 := down(bs)
		two, took := rescaleTo(b, bs, w.Epoch(), remote, id1, [][]string{owners[:2], owners[2:]}, keysPerOwner, valueSize)
		lines = append(lines, fmt.Sprintf("| %s | 4 → 2 | %.2f s | %.1f MiB |", mode, took.Seconds(), float64(down(bs)-down0)/(1<<20)))
		id2 := checkpointByParts(b, w, two, 2)
		closeWorkers(two)

		down0 = down(bs)
		four, took = rescaleTo(b, bs, w.Epoch(), remote, id2, [][]string{owners[:1], owners[1:2], owners[2:3], owners[3:]}, keysPerOwner, valueSize)
		lines = append(lines, fmt.Sprintf("| %s | 2 → 4 | %.2f s | %.1f MiB |", mode, took.Seconds(), float64(down(bs)-down0)/(1<<20)))
		closeWorkers(four)
	}
	fmt.Printf("rescale of %d MiB in 4 owners on MinIO: time from the resumed workers' start to the first record processed by all, and bytes downloaded before it\n| state | rescale | first record | downloaded |\n|---|---|---|---|\n", stateMiB)
	for _, l := range lines {
		fmt.Println(l)
	}
}

// rescaleWorker is one worker process of the benchmark.
type rescaleWorker struct {
	w      *blobstorage.Worker
	st     *state.Store
	live   string
	owners []string
}

func closeWorkers(ws []*rescaleWorker) {
	for _, rw := range ws {
		_ = rw.st.Close()
	}
}

// rescaleStateOptions are the state options of the benchmark's workers.
func rescaleStateOptions(bs blobstore.Blobstore, epoch uint64, remote bool) state.Options {
	o := state.Options{MemTableSize: 64 << 20, CacheSize: 64 << 20}
	if remote {
		o.Remote = state.RemoteOptions{Store: bs, Prefix: blobstorage.RemotePrefix, Generation: blobstorage.RemoteGeneration(epoch), CacheSize: 64 << 20}
	}
	return o
}

// startRescaleWorker starts a worker on an empty disk: fresh state, or
// the owners of checkpoint from.
func startRescaleWorker(tb testing.TB, bs blobstore.Blobstore, epoch uint64, remote bool, slot, from string, owners []string) *rescaleWorker {
	tb.Helper()
	ctx := context.Background()
	dir := tb.TempDir()
	w, err := blobstorage.NewWorker(bs, filepath.Join(dir, "ckpt"), blobstorage.NewWorkerID(slot), blobstorage.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	live := filepath.Join(dir, "live")
	opts := rescaleStateOptions(bs, epoch, remote)
	var st *state.Store
	if from == "" {
		st, err = state.Open(live, opts)
	} else {
		if err := w.Restore(ctx, from, owners); err != nil {
			tb.Fatalf("Restore(%s, %v): %v", from, owners, err)
		}
		st, err = state.OpenCheckpoint(ctx, w.StateDir(from), live, opts)
	}
	if err != nil {
		tb.Fatal(err)
	}
	for _, o := range owners {
		if _, err := st.Owner(o); err != nil {
			tb.Fatal(err)
		}
	}
	if remote {
		w.UseRemote(st.CheckpointRemote())
	}
	return &rescaleWorker{w: w, st: st, live: live, owners: owners}
}

// rescaleTo starts one worker per group of owners, in parallel, from
// checkpoint from, and returns them and the time until every one of them
// read and checked a key of each of its owners.
func rescaleTo(b *testing.B, bs blobstore.Blobstore, epoch uint64, remote bool, from string, groups [][]string, keysPerOwner uint64, valueSize int) ([]*rescaleWorker, time.Duration) {
	b.Helper()
	ws := make([]*rescaleWorker, len(groups))
	start := time.Now()
	var wg sync.WaitGroup
	for i, g := range groups {
		wg.Go(func() {
			rw := startRescaleWorker(b, bs, epoch, remote, fmt.Sprint("r", i), from, g)
			for _, o := range g {
				owner, err := rw.st.Owner(o)
				if err != nil {
					b.Error(err)
					return
				}
				k := keysPerOwner / 2
				got, ok, err := owner.Get(stateKey(o, k))
				if err != nil || !ok || !bytes.Equal(got, stateValue(o, 1, k, valueSize)) {
					b.Errorf("owner %s key %d after the rescale: present %v, err %v, or another value", o, k, ok, err)
				}
			}
			ws[i] = rw
		})
	}
	wg.Wait()
	took := time.Since(start)
	if b.Failed() {
		b.FailNow()
	}
	return ws, took
}

// checkpointByParts has every worker save its part of checkpoint seq and
// commits it on w.
func checkpointByParts(tb testing.TB, w *blobstorage.Storage, ws []*rescaleWorker, seq uint64) string {
	tb.Helper()
	id := checkpoint.NewID(seq)
	a := blobstorage.Assignment{}
	for _, rw := range ws {
		for _, o := range rw.owners {
			a[o] = rw.w.ID()
		}
	}
	if err := w.Assign(a); err != nil {
		tb.Fatal(err)
	}
	errs := make([]error, len(ws))
	var wg sync.WaitGroup
	for i, rw := range ws {
		wg.Go(func() {
			dirs, err := rw.st.Checkpoint(context.Background(), rw.w.StateDir(id))
			if err == nil {
				_, err = rw.w.SavePart(context.Background(), w.Epoch(), &checkpoint.CheckpointData{ID: id, StateDirs: dirs})
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			tb.Fatalf("SavePart(%s): %v", id, err)
		}
	}
	if err := w.Save(context.Background(), completedRecord(id, nil)); err != nil {
		tb.Fatalf("commit %s: %v", id, err)
	}
	return id
}

// down returns the bytes callers read from bs's gets.
func down(bs *blobstoretest.Interceptor) int64 {
	_, d := bs.Bytes()
	return d
}
