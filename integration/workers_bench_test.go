package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/integration/miniotest"
)

// BenchmarkWorkers measures a job spanning hosts on MinIO: the same state
// (TIDEMARK_BENCH_STATE_MIB, default 256 MiB, in 8 owners of 4 MiB
// tables) saved by 1, 2 and 4 workers uploading their parts concurrently
// (goroutines, each with its own Worker) and committed by a coordinator:
// a full checkpoint, then an incremental one (every table hard-linked, one
// new 1 MiB table and a new MANIFEST per owner). It reports the time and
// the S3 requests by kind of each, and the time for one replaced worker
// to restore its owners against the time for the whole job to restore.
// The figures are the reported metrics and the logged line (ns/op times
// nothing: the timer is stopped around the setup of every run). Requests
// are counted on the wire, all workers' and the coordinator's together.
//
//	TIDEMARK_MINIO=process go test ./integration -run '^$' -bench BenchmarkWorkers -benchtime 1x
func BenchmarkWorkers(b *testing.B) {
	const owners, tableMiB = 8, 4
	stateMiB := envInt(b, "TIDEMARK_BENCH_STATE_MIB", 256)
	tables := max(1, stateMiB/owners/tableMiB)
	miniotest.Shared(b)
	// The tables every run hard-links into its workers' state dirs (a
	// fresh Worker has an empty cache, so it uploads them all).
	tmpl := b.TempDir()
	for o := range owners {
		dir := filepath.Join(tmpl, fmt.Sprint("op-", o))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for i := range tables {
			p := filepath.Join(dir, fmt.Sprintf("%06d.sst", i+1))
			if err := os.WriteFile(p, blobstoretest.Payload(uint64(o*1000+i), tableMiB<<20), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, n := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("workers=%d", n), func(b *testing.B) {
			var full, incr, restoreOne, restoreAll time.Duration
			var fullReq, incrReq, oneReq [numKinds]int64
			for b.Loop() {
				b.StopTimer()
				r := benchWorkersOnce(b, n, owners, tmpl)
				full, incr, restoreOne, restoreAll = full+r.full, incr+r.incr, restoreOne+r.restoreOne, restoreAll+r.restoreAll
				for k := range numKinds {
					fullReq[k] += r.fullReq[k]
					incrReq[k] += r.incrReq[k]
					oneReq[k] += r.oneReq[k]
				}
				b.StartTimer()
			}
			N := float64(b.N)
			b.ReportMetric(full.Seconds()/N, "full-ckpt-s")
			b.ReportMetric(incr.Seconds()/N, "incr-ckpt-s")
			b.ReportMetric(restoreOne.Seconds()/N, "restore-1-worker-s")
			b.ReportMetric(restoreAll.Seconds()/N, "restore-job-s")
			kinds := func(req [numKinds]int64) string {
				var parts []string
				for _, k := range []int{kindPut, kindPost, kindGet, kindHead, kindList, kindDelete, kindOther} {
					if req[k] != 0 || k != kindPost && k != kindOther {
						parts = append(parts, fmt.Sprintf("%s %.0f", kindNames[k], float64(req[k])/N))
					}
				}
				return strings.Join(parts, ", ")
			}
			b.Logf("%d MiB in %d owners, %d worker(s): full checkpoint %.2fs (%s); incremental %.2fs (%s); "+
				"one worker restores its %d owner(s) in %.2fs (%s), the whole job in %.2fs",
				owners*tables*tableMiB, owners, n, full.Seconds()/N, kinds(fullReq), incr.Seconds()/N, kinds(incrReq),
				owners/n, restoreOne.Seconds()/N, kinds(oneReq), restoreAll.Seconds()/N)
		})
	}
}

type workersRun struct {
	full, incr, restoreOne, restoreAll time.Duration
	fullReq, incrReq, oneReq           [numKinds]int64
}

// benchWorkersOnce runs one full and one incremental checkpoint with n
// workers on a fresh bucket, then the two restores.
func benchWorkersOnce(b *testing.B, n, owners int, tmpl string) workersRun {
	ctx := context.Background()
	bs, requests := countedBucket(b, 0)
	coord := blobstorage.New(bs, b.TempDir(), blobstorage.Options{})
	if _, err := coord.Acquire(ctx); err != nil {
		b.Fatal(err)
	}
	workers := make([]*blobstorage.Worker, n)
	mine := make([][]string, n) // owners of each worker
	a := blobstorage.Assignment{}
	for i := range workers {
		w, err := blobstorage.NewWorker(bs, b.TempDir(), blobstorage.NewWorkerID(fmt.Sprint("worker-", i)), blobstorage.Options{})
		if err != nil {
			b.Fatal(err)
		}
		workers[i] = w
	}
	for o := range owners {
		owner := fmt.Sprint("op-", o)
		i := o * n / owners
		mine[i] = append(mine[i], owner)
		a[owner] = workers[i].ID()
	}
	if err := coord.Assign(a); err != nil {
		b.Fatal(err)
	}
	// link hard-links every table of from (a directory per owner) into
	// StateDir(id) of each worker, and adds extra files.
	link := func(id string, from func(w int, owner string) string, extra func(w *blobstorage.Worker, owner string)) {
		for i, w := range workers {
			for _, owner := range mine[i] {
				src, dst := from(i, owner), filepath.Join(w.StateDir(id), owner)
				if err := os.MkdirAll(dst, 0o755); err != nil {
					b.Fatal(err)
				}
				entries, err := os.ReadDir(src)
				if err != nil {
					b.Fatal(err)
				}
				for _, e := range entries {
					if strings.HasSuffix(e.Name(), ".sst") {
						if err := os.Link(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
							b.Fatal(err)
						}
					}
				}
				extra(w, owner)
			}
		}
	}
	// checkpoint has every worker save its part concurrently, then the
	// coordinator commit; it returns the time and the requests.
	checkpointAll := func(id string) (time.Duration, [numKinds]int64) {
		before := requests.snapshot()
		t0 := time.Now()
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i, w := range workers {
			wg.Go(func() {
				dirs := map[string]string{}
				for _, o := range mine[i] {
					dirs[o] = o
				}
				_, errs[i] = w.SavePart(ctx, coord.Epoch(), &checkpoint.CheckpointData{ID: id, StateDirs: dirs})
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
		if err := coord.Save(ctx, completedRecord(id, nil)); err != nil {
			b.Fatal(err)
		}
		d := time.Since(t0)
		after := requests.snapshot()
		for k := range after {
			after[k] -= before[k]
		}
		return d, after
	}
	writeFile := func(p string, data []byte) {
		if err := os.WriteFile(p, data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	var r workersRun
	id1, id2 := checkpoint.NewID(1), checkpoint.NewID(2)
	link(id1, func(_ int, owner string) string { return filepath.Join(tmpl, owner) }, func(w *blobstorage.Worker, owner string) {
		writeFile(filepath.Join(w.StateDir(id1), owner, "MANIFEST-000001"), blobstoretest.Payload(1, 64<<10))
	})
	r.full, r.fullReq = checkpointAll(id1)
	link(id2, func(i int, owner string) string { return filepath.Join(workers[i].StateDir(id1), owner) }, func(w *blobstorage.Worker, owner string) {
		dir := filepath.Join(w.StateDir(id2), owner)
		writeFile(filepath.Join(dir, "MANIFEST-000002"), blobstoretest.Payload(2, 64<<10))
		writeFile(filepath.Join(dir, "900001.sst"), blobstoretest.Payload(uint64(len(owner))<<32|2, 1<<20))
	})
	r.incr, r.incrReq = checkpointAll(id2)

	// Worker 0 is replaced by a fresh one on an empty disk.
	fresh, err := blobstorage.NewWorker(bs, b.TempDir(), blobstorage.NewWorkerID("worker-0"), blobstorage.Options{})
	if err != nil {
		b.Fatal(err)
	}
	before := requests.snapshot()
	t0 := time.Now()
	if err := fresh.Restore(ctx, id2, mine[0]); err != nil {
		b.Fatal(err)
	}
	r.restoreOne = time.Since(t0)
	after := requests.snapshot()
	for k := range after {
		r.oneReq[k] = after[k] - before[k]
	}
	job := blobstorage.New(bs, b.TempDir(), blobstorage.Options{})
	t0 = time.Now()
	if err := job.Restore(ctx, id2); err != nil {
		b.Fatal(err)
	}
	r.restoreAll = time.Since(t0)
	return r
}
