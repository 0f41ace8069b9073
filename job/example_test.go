package job_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore/memstore"
	"github.com/tidemark-io/tidemark/job"
	"github.com/tidemark-io/tidemark/state"
)

// numbers is the job: a replayable log of the numbers 1…n, and a
// processor that keeps their running total in the state. Its node dies
// (Next fails) once it read diesAfter numbers, unless that is 0.
type numbers struct{ next, n, diesAfter int }

// atoi parses a decimal number; nil is 0.
func atoi(b []byte) int { n, _ := strconv.Atoi(string(b)); return n }

// Seek goes back to what Offsets returned (nil: 0, the beginning).
func (s *numbers) Seek(_ context.Context, off []byte) error { s.next = atoi(off); return nil }

func (s *numbers) Offsets() ([]byte, error) { return []byte(strconv.Itoa(s.next)), nil }

func (s *numbers) Next(context.Context) ([]job.Record, error) {
	if s.next == s.n {
		return nil, io.EOF // the log ends: a final checkpoint, then Run returns
	} else if s.next == s.diesAfter && s.diesAfter > 0 {
		return nil, errors.New("the node dies") // Run returns this error
	}
	s.next++
	return []job.Record{{Key: []byte(strconv.Itoa(s.next))}}, nil
}

func (*numbers) Process(_ context.Context, st *state.Store, in []job.Record) ([]job.Record, error) {
	sum, _ := st.Owner("sum")
	v, _, err := sum.Get([]byte("total"))
	total := atoi(v)
	for i := range in {
		total += atoi(in[i].Key)
		in[i].Value = []byte(strconv.Itoa(total))
	}
	return in, errors.Join(err, sum.Set([]byte("total"), []byte(strconv.Itoa(total))))
}

// A complete exactly-once job. Node 1 dies mid-stream, with its disk;
// node 2 resumes from the bucket on an empty disk. The output holds each
// number once, with the running total the state kept across the nodes.
func Example() {
	bucket := memstore.New() // s3store or filestore in production
	for node, src := range []*numbers{{n: 10, diesAfter: 5}, {n: 10}} {
		disk, _ := os.MkdirTemp("", "node-")
		_, err := job.Run(context.Background(), job.Config{Dir: disk, Source: src, Processor: src,
			Storage: blobstorage.New(bucket, filepath.Join(disk, "checkpoints"), blobstorage.Options{}),
			Sink:    job.NewBlobSink(bucket, "out/"), EveryRecords: 2})
		os.RemoveAll(disk) // node 1's disk is lost with it
		fmt.Println("node", node+1, "died:", err != nil)
	}
	// Any node reads the committed output.
	for rec, err := range job.NewBlobSink(bucket, "out/").Output(context.Background()) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Print(string(rec.Key), ":", string(rec.Value), " ")
	}
	// Output:
	// node 1 died: true
	// node 2 died: false
	// 1:1 2:3 3:6 4:10 5:15 6:21 7:28 8:36 9:45 10:55
}

// Stop a job with a final checkpoint and a savepoint, as on SIGTERM,
// within a deadline; a resume reads on from exactly where it stopped.
func ExampleJob_Stop() {
	bucket := memstore.New()
	disk, _ := os.MkdirTemp("", "node-")
	defer os.RemoveAll(disk)
	storage := blobstorage.New(bucket, filepath.Join(disk, "checkpoints"), blobstorage.Options{})
	src := &numbers{n: 1 << 30}
	read := make(chan struct{})
	j, err := job.Start(context.Background(), job.Config{
		Storage: storage, Dir: disk, Source: src, Processor: src, Sink: job.NewBlobSink(bucket, "out/"),
		Observe: func(e job.Event) {
			if e.Kind == job.EventBatch && e.Records == 100 { // once
				close(read)
			}
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	<-read // … then SIGTERM arrives
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	res, err := j.Stop(ctx, job.StopOptions{Savepoint: "before-upgrade"})
	if err != nil {
		log.Fatal(err)
	}
	cp, _ := storage.LoadLatestCompleted(ctx)
	fmt.Println("savepoint:", res.Savepoint)
	fmt.Println("a resume reads on from the last record read:", string(cp.Offsets()) == fmt.Sprint(res.Records))
	// Output:
	// savepoint: savepoints/before-upgrade
	// a resume reads on from the last record read: true
}
