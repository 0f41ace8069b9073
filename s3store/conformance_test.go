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

// longKey returns a key of exactly n bytes made of 200-byte segments.
func longKey(n int) string {
	var b strings.Builder
	for b.Len() < n {
		if b.Len() > 0 {
			b.WriteByte('/')
		}
		b.WriteString(strings.Repeat("k", min(200, n-b.Len())))
	}
	return b.String()
}

func TestLongestKeyOfShortSegments(t *testing.T) {
	ctx := context.Background()
	srv := miniotest.Shared(t)
	t.Run("plain", func(t *testing.T) {
		s := newStore(t, srv, nil)
		key := longKey(blobstore.MaxKeyLen)
		if err := s.Put(ctx, key, strings.NewReader("x")); err != nil {
			t.Fatalf("put %d-byte key: %v", len(key), err)
		}
		if got := string(readAll(t, s, key)); got != "x" {
			t.Fatalf("got %q", got)
		}
	})
	t.Run("prefix counts toward the limit", func(t *testing.T) {
		s := newStore(t, srv, func(o *Options) { o.Prefix = "p" })
		fits := longKey(blobstore.MaxKeyLen - 2)
		if err := s.Put(ctx, fits, strings.NewReader("x")); err != nil {
			t.Fatalf("put %d-byte key under prefix %q: %v", len(fits), "p/", err)
		}
		tooLong := longKey(blobstore.MaxKeyLen - 1)
		if err := s.Put(ctx, tooLong, strings.NewReader("x")); !errors.Is(err, blobstore.ErrInvalidKey) {
			t.Fatalf("put %d-byte key under prefix: got %v, want ErrInvalidKey", len(tooLong), err)
		}
	})
}
