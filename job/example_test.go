package job_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore/memstore"
	"github.com/tidemark-io/tidemark/job"
	"github.com/tidemark-io/tidemark/state"
)

// numbers is a replayable source of the numbers 1…n.
type numbers struct{ next, n int }

func (s *numbers) Seek(_ context.Context, off []byte) error {
	s.next = 0
	if off == nil {
		return nil
	}
	return json.Unmarshal(off, &s.next)
}

func (s *numbers) Next(context.Context) ([]job.Record, error) {
	if s.next == s.n {
		return nil, io.EOF
	}
	s.next++
	return []job.Record{{Key: []byte(strconv.Itoa(s.next))}}, nil
}

func (s *numbers) Offsets() ([]byte, error) { return json.Marshal(s.next) }

// sum keeps a running total in the state and outputs each number with it.
type sum struct{}

func (sum) Process(_ context.Context, st *state.Store, in []job.Record) ([]job.Record, error) {
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

// A complete exactly-once job. Node 1 dies with its disk after a few
// checkpoints; node 2 resumes from the bucket on an empty disk.
func Example() {
	ctx := context.Background()
	bucket := memstore.New() // s3store or filestore in production
	sink := job.NewBlobSink(bucket, "out/")
	for node := 1; node <= 2; node++ {
		disk, _ := os.MkdirTemp("", "node-")
		ctx, die := context.WithCancel(ctx)
		_, err := job.Run(ctx, job.Config{
			Storage:      blobstorage.New(bucket, filepath.Join(disk, "checkpoints"), blobstorage.Options{}),
			Dir:          disk,
			Source:       &numbers{n: 1000},
			Processor:    sum{},
			Sink:         sink,
			EveryRecords: 100,
			Observe: func(e job.Event) {
				if node == 1 && e.Records >= 500 {
					die() // node 1 dies mid-stream
				}
			},
		})
		die()
		os.RemoveAll(disk) // with its disk
		fmt.Printf("node %d: failed=%v\n", node, err != nil)
	}
	seen, last := map[string]bool{}, ""
	for rec, err := range sink.Output(ctx) {
		if err != nil || seen[string(rec.Key)] {
			fmt.Println("not exactly once:", string(rec.Key), err)
		}
		seen[string(rec.Key)], last = true, string(rec.Value)
	}
	fmt.Printf("output: %d numbers, total %s\n", len(seen), last)
	// Output:
	// node 1: failed=true
	// node 2: failed=false
	// output: 1000 numbers, total 500500
}
