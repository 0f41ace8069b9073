package integration

import (
	"context"
	"io"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/integration/miniotest"
	"github.com/tidemark-io/tidemark/job"
	"github.com/tidemark-io/tidemark/state"
)

// jobNumbers is a job.Source of the numbers 1…n, batch at a time, and a
// job.Processor that outputs each with the running total in its state.
type jobNumbers struct{ next, n, batch int }

func (s *jobNumbers) Seek(_ context.Context, off []byte) error {
	s.next, _ = strconv.Atoi(string(off))
	return nil
}

func (s *jobNumbers) Offsets() ([]byte, error) { return []byte(strconv.Itoa(s.next)), nil }

func (s *jobNumbers) Next(ctx context.Context) ([]job.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.next == s.n {
		return nil, io.EOF
	}
	var out []job.Record
	for ; len(out) < s.batch && s.next < s.n; s.next++ {
		out = append(out, job.Record{Key: []byte(strconv.Itoa(s.next + 1))})
	}
	return out, nil
}

func (*jobNumbers) Process(_ context.Context, st *state.Store, in []job.Record) ([]job.Record, error) {
	o, err := st.Owner("sum")
	if err != nil {
		return nil, err
	}
	v, _, err := o.Get([]byte("total"))
	if err != nil {
		return nil, err
	}
	total, _ := strconv.Atoi(string(v))
	for i := range in {
		n, _ := strconv.Atoi(string(in[i].Key))
		total += n
		in[i].Value = []byte(strconv.Itoa(total))
	}
	return in, o.Set([]byte("total"), []byte(strconv.Itoa(total)))
}

// The job runtime on real MinIO with the reference sink: three nodes
// killed mid-stream (each on an empty disk), one stopped with a savepoint,
// and a last one that runs to the end. The output holds every number
// exactly once with the right running total, and the resume after the
// stop reads nothing twice.
func TestJobRuntimeOnMinIOExactlyOnce(t *testing.T) {
	srv := miniotest.Shared(t)
	bs := openBucket(t, srv, srv.NewBucket(t))
	sink := job.NewBlobSink(bs, "out/")
	const n = 3000
	cfg := func(src *jobNumbers) job.Config {
		disk := t.TempDir()
		return job.Config{
			Storage: blobstorage.New(bs, disk+"/checkpoints", blobstorage.Options{}), Dir: disk,
			Source: src, Processor: src, Sink: sink, EveryRecords: 200,
			State: state.Options{MemTableSize: 256 << 10, CacheSize: 1 << 20},
		}
	}
	for i, at := range []uint64{150, 420, 777} {
		ctx, kill := context.WithCancel(t.Context())
		c := cfg(&jobNumbers{n: n, batch: 7})
		c.Observe = func(e job.Event) {
			if e.Records >= at {
				kill()
			}
		}
		res, err := job.Run(ctx, c)
		kill()
		t.Logf("node %d killed after %d records: restored %q, %d checkpoints: %v", i+1, at, res.Restored, res.Checkpoints, err)
		if err == nil {
			t.Fatalf("node %d was not killed", i+1)
		}
	}

	// A node stopped with a savepoint.
	c := cfg(&jobNumbers{n: n, batch: 7})
	reached := make(chan struct{})
	var once sync.Once
	c.Observe = func(e job.Event) {
		if e.Records >= 300 {
			once.Do(func() { close(reached) })
		}
	}
	j, err := job.Start(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	<-reached
	stopCtx, cancel := context.WithTimeout(t.Context(), 25*time.Second)
	defer cancel()
	stopped, err := j.Stop(stopCtx, job.StopOptions{Savepoint: "minio-stop"})
	if err != nil {
		t.Fatalf("stop: %v", err)
	}

	// Read before the last node runs: its GC may delete the record.
	cp, err := blobstorage.New(bs, t.TempDir(), blobstorage.Options{}).LoadSpecific(t.Context(), stopped.Last)
	if err != nil {
		t.Fatal(err)
	}
	src := &jobNumbers{n: n, batch: 7}
	last, err := job.Run(t.Context(), cfg(src))
	if err != nil {
		t.Fatalf("last node: %v", err)
	}
	if last.Restored != stopped.Last {
		t.Errorf("the last node restored %s, want the stop's final checkpoint %s", last.Restored, stopped.Last)
	}
	if off, _ := strconv.Atoi(string(cp.Offsets())); last.Records != uint64(n-off) {
		t.Errorf("the last node read %d records after the stop at %d, want %d: records read twice", last.Records, off, n-off)
	}
	var got []job.Record
	for rec, err := range sink.Output(t.Context()) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, rec)
	}
	if len(got) != n {
		t.Errorf("output holds %d records, want %d", len(got), n)
	}
	total := 0
	for i, r := range got {
		total += i + 1
		if string(r.Key) != strconv.Itoa(i+1) || string(r.Value) != strconv.Itoa(total) {
			t.Fatalf("output record %d is %s:%s, want %d:%d", i, r.Key, r.Value, i+1, total)
		}
	}
	if ok, err := bs.Exists(t.Context(), "savepoints/minio-stop"); err != nil || !ok {
		t.Errorf("savepoint missing: %v %v", ok, err)
	}
}
