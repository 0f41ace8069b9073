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

// numbers is the job: a replayable source of the numbers 1…n, and a
// processor that keeps their running total in the state.
type numbers struct{ next, n int }

func (s *numbers) Seek(_ context.Context, offsets []byte) error {
	s.next, _ = strconv.Atoi(string(offsets)) // nil: 0, the beginning
	return nil
}

func (s *numbers) Offsets() ([]byte, error) { return []byte(strconv.Itoa(s.next)), nil }

func (s *numbers) Next(context.Context) ([]job.Record, error) {
	if s.next == s.n {
		return nil, io.EOF
	}
	s.next++
	return []job.Record{{Key: []byte(strconv.Itoa(s.next))}}, nil
}

func (*numbers) Process(_ context.Context, st *state.Store, in []job.Record) ([]job.Record, error) {
	sum, _ := st.Owner("sum")
	v, _, err := sum.Get([]byte("total"))
	total, _ := strconv.Atoi(string(v))
	for i := range in {
		n, _ := strconv.Atoi(string(in[i].Key))
		total += n
		in[i].Value = []byte(strconv.Itoa(total))
	}
	return in, errors.Join(err, sum.Set([]byte("total"), []byte(strconv.Itoa(total))))
}

// A complete exactly-once job. Node 1 dies mid-stream with its disk;
// node 2 resumes from the bucket on an empty disk. The output holds each
// number once, with the running total the state kept across the nodes.
func Example() {
	bucket := memstore.New() // s3store or filestore in production
	sink := job.NewBlobSink(bucket, "out/")
	for node := 1; node <= 2; node++ {
		disk, _ := os.MkdirTemp("", "node-")
		ctx, die := context.WithCancel(context.Background())
		src := &numbers{n: 10}
		_, err := job.Run(ctx, job.Config{
			Storage: blobstorage.New(bucket, filepath.Join(disk, "checkpoints"), blobstorage.Options{}),
			Dir:     disk, Source: src, Processor: src, Sink: sink, EveryRecords: 2,
			Observe: func(e job.Event) {
				if node == 1 && e.Records == 5 {
					die() // node 1 dies…
				}
			},
		})
		die()
		os.RemoveAll(disk) // …with its disk
		fmt.Println("node", node, "died:", err != nil)
	}
	for rec, err := range sink.Output(context.Background()) {
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
			if e.Records == 100 {
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
