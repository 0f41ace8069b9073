package s3store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/integration/miniotest"
)

// downloadSize is four and a bit parts.
const downloadSize = 4*testPartSize + 12345

func TestGetParallelYieldsTheObjectInOrder(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, miniotest.Shared(t), func(o *Options) { o.Concurrency = 2 })
	data := randomBytes(downloadSize, 9)
	if err := s.Put(ctx, "k", stream(data)); err != nil {
		t.Fatal(err)
	}
	rc, err := s.GetParallel(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	var got bytes.Buffer
	if _, err := io.Copy(io.MultiWriter(h, &got), rc); err != nil {
		t.Fatal(err)
	}
	rc.Close()
	if !bytes.Equal(got.Bytes(), data) {
		t.Fatalf("got %d bytes, differing from the %d written", got.Len(), len(data))
	}
	if want := sha256.Sum256(data); !bytes.Equal(h.Sum(nil), want[:]) {
		t.Error("digest differs")
	}
}

func TestGetParallelFailsWhenTheObjectIsReplaced(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, miniotest.Shared(t), func(o *Options) { o.Concurrency = 2 })
	if err := s.Put(ctx, "k", stream(randomBytes(downloadSize, 10))); err != nil {
		t.Fatal(err)
	}
	rc, err := s.GetParallel(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	// Consume the first part exactly: with two slots, parts 1 and 2 are
	// fetched, part 3 not before part 1 is released.
	if _, err := io.CopyN(io.Discard, rc, testPartSize); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "k", stream(randomBytes(downloadSize, 11))); err != nil {
		t.Fatal(err)
	}
	_, err = io.Copy(io.Discard, rc)
	if !errors.Is(err, blobstore.ErrPreconditionFailed) {
		t.Fatalf("reading a replaced object: got %v, want ErrPreconditionFailed", err)
	}
}

func TestGetParallelCloseEarly(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, miniotest.Shared(t), func(o *Options) { o.Concurrency = 3 })
	if err := s.Put(ctx, "k", stream(randomBytes(downloadSize, 12))); err != nil {
		t.Fatal(err)
	}
	rc, err := s.GetParallel(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.CopyN(io.Discard, rc, 100); err != nil {
		t.Fatal(err)
	}
	if err := rc.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Read(make([]byte, 1)); err == nil {
		t.Error("read after close succeeded")
	}
}

func TestDownloadWritesTheObjectToAFile(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, miniotest.Shared(t), nil)
	for _, size := range []int{0, 1000, downloadSize} {
		data := randomBytes(size, 13)
		if err := s.Put(ctx, "k", stream(data)); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "f")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		n, err := s.Download(ctx, "k", f)
		f.Close()
		if err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		got, _ := os.ReadFile(path)
		if n != int64(size) || !bytes.Equal(got, data) {
			t.Errorf("size %d: downloaded %d bytes, file %d bytes, equal %v", size, n, len(got), bytes.Equal(got, data))
		}
	}
	if _, err := s.Download(ctx, "missing", nil); !errors.Is(err, blobstore.ErrNotFound) {
		t.Errorf("missing key: got %v, want ErrNotFound", err)
	}
}
