package demo_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/cmd/tidemark/internal/demo"
	"github.com/tidemark-io/tidemark/filestore"
)

// Run the word-count job with its checkpoints in a directory store, then
// run it again on a "new node" (an empty local directory): it restores the
// latest completed checkpoint and finds the output exactly-once.
func ExampleRun() {
	tmp, err := os.MkdirTemp("", "demo-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(tmp)
	bs, err := filestore.New(filepath.Join(tmp, "store"))
	if err != nil {
		panic(err)
	}
	for _, node := range []string{"node1", "node2"} {
		dir := filepath.Join(tmp, node)
		res, err := demo.Run(context.Background(), demo.Config{
			Storage:      blobstorage.New(bs, filepath.Join(dir, "checkpoints"), blobstorage.Options{}),
			Sink:         demo.NewSink(bs),
			Dir:          dir,
			Records:      5000,
			Words:        50,
			Interval:     time.Hour,
			EveryRecords: 2000,
		})
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s: %s from offset %d, %d checkpoints; %s\n", node, res.Action, res.StartOffset, res.Checkpoints, res.Check)
	}
	// Output:
	// node1: start-fresh from offset 0, 3 checkpoints; exactly-once: OK, 5000 records, 50 words (3 committed transactions)
	// node2: restore from offset 5000, 0 checkpoints; exactly-once: OK, 5000 records, 50 words (3 committed transactions)
}
