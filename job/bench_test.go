package job_test

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"

	"github.com/tidemark-io/tidemark/blobstore/memstore"
	"github.com/tidemark-io/tidemark/filestore"
	"github.com/tidemark-io/tidemark/job"
)

// BenchmarkBlobSinkTxn writes one 64 MiB transaction (1 KiB records)
// through Write, Prepare and Commit on a filestore, and reports the heap
// it grew by: Write buffers in a temporary file, so it stays far below
// the transaction's size.
func BenchmarkBlobSinkTxn(b *testing.B) {
	const recSize, recs, batch = 1 << 10, 64 << 10, 1000
	fs, err := filestore.New(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	s := job.NewBlobSink(fs, "out/")
	val := bytes.Repeat([]byte{'x'}, recSize-16)
	out := make([]job.Record, batch)
	b.SetBytes(recSize * recs)
	var peak uint64
	for i := 0; b.Loop(); i++ {
		txn := job.Txn{ID: fmt.Sprintf("ckpt-%020d", i+1), Writer: "e1"}
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		for n := 0; n < recs; n += batch {
			for j := range out {
				out[j] = job.Record{Key: fmt.Appendf(nil, "%015d", n+j), Value: val}
			}
			if err := s.Write(b.Context(), txn, out); err != nil {
				b.Fatal(err)
			}
		}
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		peak = max(peak, after.HeapInuse-min(after.HeapInuse, before.HeapInuse))
		if err := s.Prepare(b.Context(), txn); err != nil {
			b.Fatal(err)
		}
		if err := s.Commit(b.Context(), txn); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(peak)/(1<<20), "heap-growth-MiB")
}

// BenchmarkRun runs a job of 20,000 records (batches of 100, a
// checkpoint every 2,000) on memstore with the reference sink, and
// reports records per second end to end, recovery and checkpoints
// included.
func BenchmarkRun(b *testing.B) {
	const n = 20_000
	for b.Loop() {
		bucket := memstore.New()
		disk := b.TempDir()
		src := &source{n: n, batch: 100}
		res, err := job.Run(b.Context(), job.Config{
			Storage: node(b, bucket, disk), Dir: disk, Source: src, Processor: summer{},
			Sink: job.NewBlobSink(bucket, "out/"), EveryRecords: 2000, State: smallState,
		})
		if err != nil || res.Checkpoints != n/2000 {
			b.Fatalf("run: %+v %v", res, err)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "records/s")
}
