package blobstorage_test

import (
	"context"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstorage/remotetest"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/memstore"
	"github.com/tidemark-io/tidemark/checkpoint"
)

// readCounter counts whole reads of each remote object.
type readCounter struct {
	blobstore.Blobstore
	mu    sync.Mutex
	reads map[string]int
}

func (c *readCounter) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if strings.HasPrefix(key, blobstorage.RemotePrefix+"/") {
		c.mu.Lock()
		c.reads[key]++
		c.mu.Unlock()
	}
	return c.Blobstore.Get(ctx, key)
}

// A second savepoint of state in remote mode reads none of the remote
// objects the first one holds: their digests are the first one's (their
// names are never reused), and their content is in the savepoint area.
// Only the new objects are read: once to hash, once to upload.
func TestAnIncrementalSavepointOfRemoteStateReadsOnlyNewObjects(t *testing.T) {
	ctx := t.Context()
	bs := memstore.New()
	a := remotetest.NewJob(t, bs, blobstorage.Options{})
	m := remotetest.Model{}
	a.Write(t, m, 1, 0, 3000)
	id1 := a.Checkpoint(t, 1)
	if _, err := checkpoint.CreateSavepoint(ctx, a.Storage, bs, "v1"); err != nil {
		t.Fatal(err)
	}
	a.Write(t, m, 2, 3000, 3300)
	id2 := a.Checkpoint(t, 2)
	old, all := remotetest.Referenced(t, a.Storage, id1), remotetest.Referenced(t, a.Storage, id2)
	kept := 0
	for k := range all {
		if old[k] {
			kept++
		}
	}
	if kept == 0 || kept == len(all) {
		t.Fatalf("checkpoint 2 keeps %d of its %d remote objects from checkpoint 1: the test checks nothing", kept, len(all))
	}
	c := &readCounter{Blobstore: bs, reads: map[string]int{}}
	reader := blobstorage.New(c, t.TempDir(), blobstorage.Options{})
	if _, err := checkpoint.CreateSavepoint(ctx, reader, bs, "v2"); err != nil {
		t.Fatal(err)
	}
	for k := range all {
		want := 2 // hashed, then uploaded
		if old[k] {
			want = 0
		}
		if c.reads[k] != want {
			t.Errorf("%s (in v1: %v) read %d times, want %d", k, old[k], c.reads[k], want)
		}
	}
	// And v2 holds the state: restored elsewhere, it reads back.
	dst := remotetest.NewJob(t, memstore.New(), blobstorage.Options{})
	if _, err := checkpoint.RestoreSavepoint(ctx, dst.Storage, bs, "v2"); err != nil {
		t.Fatal(err)
	}
}
