package remotestore

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/memstore"
)

func TestReadObjectOfSizeReadsWithoutStatAndFailsOnMissingOrShortObjects(t *testing.T) {
	ctx := context.Background()
	bs := memstore.New()
	s, err := New(bs, "p", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	data := bytes.Repeat([]byte("0123456789"), 100)
	if err := bs.Put(ctx, "p/obj", bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	r, err := s.ReadObjectOfSize(ctx, "obj", int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 100)
	if err := r.ReadAt(ctx, got, 900); err != nil || !bytes.Equal(got, data[900:]) {
		t.Fatalf("ReadAt: %v", err)
	}
	if err := r.ReadAt(ctx, got, 901); err == nil {
		t.Fatal("a read past the size succeeded")
	}

	// Truncated after the size was learnt: the read past its new end fails.
	if err := bs.Put(ctx, "p/obj", bytes.NewReader(data[:500])); err != nil {
		t.Fatal(err)
	}
	if err := r.ReadAt(ctx, got, 450); !errors.Is(err, ErrObjectChanged) {
		t.Fatalf("read across the end of a truncated object: %v, want ErrObjectChanged", err)
	}

	// Missing: the first read fails with ErrNotFound.
	m, err := s.ReadObjectOfSize(ctx, "missing", 1000)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.ReadAt(ctx, got, 0); !errors.Is(err, blobstore.ErrNotFound) || !s.IsNotExistError(err) {
		t.Fatalf("read of a missing object: %v, want ErrNotFound", err)
	}
	if _, err := s.ReadObjectOfSize(ctx, "obj", -1); err == nil {
		t.Fatal("negative size accepted")
	}
}
