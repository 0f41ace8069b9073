package encrypted_test

import (
	"bytes"
	"context"
	"io"
	"sync/atomic"
	"testing"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
	"github.com/tidemark-io/tidemark/blobstore/encrypted"
	"github.com/tidemark-io/tidemark/blobstore/memstore"
)

// rangeCounter counts the ranged reads that reach the store.
type rangeCounter struct {
	blobstore.Blobstore
	n atomic.Int64
}

func (c *rangeCounter) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	c.n.Add(1)
	return c.Blobstore.GetRange(ctx, key, off, n)
}

// A range read past chunk 0 reads the header once: later ones are one
// request each. When another writer replaces the object, the stale
// header is noticed and the new content read.
func TestHeaderCache(t *testing.T) {
	base := &rangeCounter{Blobstore: memstore.New()}
	k := testKey(t, 51)
	reader := wrap(t, base, k, encrypted.EncryptAll)
	other := wrap(t, base, k, encrypted.EncryptAll) // another process
	const c = encrypted.ChunkSize
	v1, v2 := blobstoretest.Payload(1, 4*c), blobstoretest.Payload(2, 4*c)
	put(t, other, "t", v1)
	read := func(want []byte, off int64) int64 {
		t.Helper()
		before := base.n.Load()
		got, err := readAll(reader, "t", off, 100)
		if err != nil || !bytes.Equal(got, want[off:off+100]) {
			t.Fatalf("GetRange(%d, 100): %v, or wrong bytes", off, err)
		}
		return base.n.Load() - before
	}
	if n := read(v1, 2*c+5); n != 2 {
		t.Fatalf("first range read: %d requests, want 2 (header, chunk)", n)
	}
	if n := read(v1, 3*c+5); n != 1 {
		t.Fatalf("second range read: %d requests, want 1", n)
	}
	put(t, other, "t", v2)
	if n := read(v2, 3*c+5); n != 3 {
		t.Fatalf("range read after a replace: %d requests, want 3 (stale chunk, header, chunk)", n)
	}
	if n := read(v2, c+5); n != 1 {
		t.Fatalf("range read after the header was read again: %d requests, want 1", n)
	}
	// A replace to a shorter object: past its end now, still right.
	put(t, other, "t", v1[:c])
	got, err := readAll(reader, "t", 3*c, 10)
	if err != nil || len(got) != 0 {
		t.Fatalf("past the end of the replaced object: %d bytes, %v", len(got), err)
	}
}
