package filestore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"strings"

	"github.com/tidemark-io/tidemark/blobstore"
	_ "github.com/tidemark-io/tidemark/filestore" // registers file://
)

// Open a directory as a Blobstore by URL, write an object, read it back,
// and move a pointer by compare-and-swap.
func Example() {
	dir, err := os.MkdirTemp("", "tidemark-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()

	bs, err := blobstore.Open(ctx, "file://"+dir)
	if err != nil {
		log.Fatal(err)
	}
	if err := bs.Put(ctx, "checkpoints/0001/checkpoint.json", strings.NewReader(`{"id":1}`)); err != nil {
		log.Fatal(err)
	}
	rc, err := bs.Get(ctx, "checkpoints/0001/checkpoint.json")
	if err != nil {
		log.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(b))

	// Conditional writes: create the pointer once, then move it only from
	// the version we read.
	etag, err := bs.PutIfAbsent(ctx, "_latest", strings.NewReader("0001"))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := bs.PutIfMatch(ctx, "_latest", etag, strings.NewReader("0002")); err != nil {
		log.Fatal(err)
	}
	_, err = bs.PutIfMatch(ctx, "_latest", etag, strings.NewReader("0003"))
	fmt.Println("stale ETag refused:", errors.Is(err, blobstore.ErrPreconditionFailed))
	// Output:
	// {"id":1}
	// stale ETag refused: true
}
