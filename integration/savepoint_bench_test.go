package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/integration/miniotest"
	"github.com/tidemark-io/tidemark/state"
)

// BenchmarkSavepointIncremental measures, on MinIO, the bytes a savepoint
// uploads after 1 % of the keys of a Pebble state were overwritten (and
// checkpointed), against a full one, and the bytes savepoint cp sends of
// it to a bucket holding the previous savepoint (another region),
// against a full copy. TIDEMARK_BENCH_STATE_MIB sets the state's size
// (default 256).
//
//	TIDEMARK_MINIO=process go test -run '^$' -bench SavepointIncremental -benchtime=1x ./integration/
func BenchmarkSavepointIncremental(b *testing.B) {
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
	srv := miniotest.Shared(b)
	eastUp, westUp := &contentBytes{}, &contentBytes{}
	eastBucket, _ := openCountedBucket(b, srv, srv.NewBucket(b), 0)
	westBucket, _ := openCountedBucket(b, srv, srv.NewBucket(b), 0)
	east, west := blobstore.Observe(eastBucket, eastUp), blobstore.Observe(westBucket, westUp)

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
	src := checkpoint.NewFileStorage(b.TempDir())
	var seq uint64
	checkpointNow := func() string {
		seq++
		id := checkpoint.NewID(seq)
		dirs, err := st.Checkpoint(ctx, src.StateDir(id))
		if err != nil {
			b.Fatal(err)
		}
		if err := src.Save(ctx, completedRecord(id, dirs)); err != nil {
			b.Fatal(err)
		}
		return id
	}
	timed := func(f func() error) time.Duration {
		t0 := time.Now()
		if err := f(); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	checkpointNow()
	label := "full"
	fullT := timed(func() error { _, err := checkpoint.CreateSavepoint(ctx, src, east, label); return err })
	full := eastUp.take()
	cpFullT := timed(func() error { return checkpoint.CopySavepoint(ctx, east, west, label) })
	cpFull := westUp.take()

	var incr, cp int64
	var incrT, cpT time.Duration
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		written := overwriteBenchState(b, st, ids, keysPerOwner, valueSize, uint64(i), uint64(100+i))
		checkpointNow() // flushes the memtables first
		prev := label
		label = fmt.Sprintf("incr-%d", i)
		b.StartTimer()
		incrT += timed(func() error { _, err := checkpoint.CreateSavepoint(ctx, src, east, label); return err })
		up := eastUp.take()
		cpT += timed(func() error { return checkpoint.CopySavepoint(ctx, east, west, label) })
		sent := westUp.take()
		incr, cp = incr+up, cp+sent
		b.Logf("round %d: %.1f MiB of keys and values overwritten (1 %% of the keys); savepoint uploaded %.2f MiB, cp to the bucket holding %s sent %.2f MiB",
			i, float64(written)/(1<<20), float64(up)/(1<<20), prev, float64(sent)/(1<<20))
	}
	n := float64(b.N)
	mib := func(x int64) float64 { return float64(x) / (1 << 20) }
	b.ReportMetric(mib(full), "full-MiB")
	b.ReportMetric(mib(incr)/n, "incremental-MiB")
	b.ReportMetric(100*float64(incr)/n/float64(full), "incremental-%")
	b.ReportMetric(mib(cp)/n, "cp-MiB")
	b.ReportMetric(100*float64(cp)/n/float64(cpFull), "cp-%")
	b.Logf("state: %d owners × %d keys × %d B values, built in %v", owners, keysPerOwner, valueSize, took.Round(time.Millisecond))
	b.Logf("savepoint create: full %.1f MiB in %v; after 1 %% churn %.2f MiB (%.2f %%) in %v",
		mib(full), fullT.Round(time.Millisecond), mib(incr)/n, 100*float64(incr)/n/float64(full), (incrT / time.Duration(b.N)).Round(time.Millisecond))
	b.Logf("savepoint cp: full %.1f MiB in %v; to a bucket holding the previous savepoint %.2f MiB (%.2f %%) in %v",
		mib(cpFull), cpFullT.Round(time.Millisecond), mib(cp)/n, 100*float64(cp)/n/float64(cpFull), (cpT / time.Duration(b.N)).Round(time.Millisecond))
}
