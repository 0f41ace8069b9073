package s3store

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
	"github.com/tidemark-io/tidemark/integration/miniotest"
)

// largeSize spans three 5 MiB parts, the last one short.
const largeSize = 2*testPartSize + 2<<20 + 17

func TestConformance(t *testing.T) {
	srv := miniotest.Shared(t)
	blobstoretest.Run(t, func(t *testing.T) blobstore.Blobstore {
		return newStore(t, srv, nil)
	}, blobstoretest.Options{LargeSize: largeSize})
}

func TestConformanceWithPrefix(t *testing.T) {
	const prefix = "jobs/job-1"
	srv := miniotest.Shared(t)
	blobstoretest.Run(t, func(t *testing.T) blobstore.Blobstore {
		return newStore(t, srv, func(o *Options) { o.Prefix = prefix })
	}, blobstoretest.Options{LargeSize: largeSize, MaxKeyLen: blobstore.MaxKeyLen - len(prefix+"/")})
}

func TestLongestKeyOfShortSegments(t *testing.T) {
	ctx := context.Background()
	srv := miniotest.Shared(t)
	t.Run("plain", func(t *testing.T) {
		s := newStore(t, srv, nil)
		key := blobstoretest.LongestKey(blobstore.MaxKeyLen)
		if err := s.Put(ctx, key, strings.NewReader("x")); err != nil {
			t.Fatalf("put %d-byte key: %v", len(key), err)
		}
		if got := string(readAll(t, s, key)); got != "x" {
			t.Fatalf("got %q", got)
		}
	})
	t.Run("prefix counts toward the limit", func(t *testing.T) {
		s := newStore(t, srv, func(o *Options) { o.Prefix = "p" })
		fits := blobstoretest.LongestKey(blobstore.MaxKeyLen - 2)
		if err := s.Put(ctx, fits, strings.NewReader("x")); err != nil {
			t.Fatalf("put %d-byte key under prefix %q: %v", len(fits), "p/", err)
		}
		tooLong := blobstoretest.LongestKey(blobstore.MaxKeyLen - 1)
		if err := s.Put(ctx, tooLong, strings.NewReader("x")); !errors.Is(err, blobstore.ErrInvalidKey) {
			t.Fatalf("put %d-byte key under prefix: got %v, want ErrInvalidKey", len(tooLong), err)
		}
	})
}
