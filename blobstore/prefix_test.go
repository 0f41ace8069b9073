package blobstore_test

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/memstore"
)

func TestWithPrefixConfinesKeys(t *testing.T) {
	ctx := t.Context()
	base := memstore.New()
	job, err := blobstore.WithPrefix(base, "jobs/a/")
	if err != nil {
		t.Fatal(err)
	}
	if err := base.Put(ctx, "jobs/ab/secret", bytes.NewReader([]byte("other job"))); err != nil {
		t.Fatal(err)
	}
	if err := job.Put(ctx, "x/y", bytes.NewReader([]byte("mine"))); err != nil {
		t.Fatal(err)
	}
	// The underlying key carries the prefix.
	if ok, err := base.Exists(ctx, "jobs/a/x/y"); err != nil || !ok {
		t.Fatalf("base.Exists(jobs/a/x/y) = %v, %v", ok, err)
	}
	// Keys that would climb out of the prefix are refused.
	for _, key := range []string{"../ab/secret", "../../jobs/ab/secret", "/jobs/ab/secret"} {
		if _, err := job.Get(ctx, key); !errors.Is(err, blobstore.ErrInvalidKey) {
			t.Errorf("Get(%q) = %v, want ErrInvalidKey", key, err)
		}
	}
	// List sees only the prefix, with keys relative to it; "jobs/ab" is
	// not under "jobs/a/".
	var keys []string
	for info, err := range job.List(ctx, "") {
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, info.Key)
	}
	if !slices.Equal(keys, []string{"x/y"}) {
		t.Fatalf("List = %q, want [x/y]", keys)
	}
	info, err := job.Stat(ctx, "x/y")
	if err != nil || info.Key != "x/y" {
		t.Fatalf("Stat = %+v, %v; want key x/y", info, err)
	}
}

func TestWithPrefixRejectsBadPrefix(t *testing.T) {
	for _, p := range []string{"../x", "/abs", "a//b"} {
		if _, err := blobstore.WithPrefix(memstore.New(), p); !errors.Is(err, blobstore.ErrInvalidKey) {
			t.Errorf("WithPrefix(%q) = %v, want ErrInvalidKey", p, err)
		}
	}
	bs := memstore.New()
	if got, err := blobstore.WithPrefix(bs, ""); err != nil || got != blobstore.Blobstore(bs) {
		t.Errorf("WithPrefix(\"\") = %v, %v; want the store itself", got, err)
	}
}

func TestOpen(t *testing.T) {
	ctx := t.Context()
	bs, err := blobstore.Open(ctx, "mem://")
	if err != nil {
		t.Fatalf("Open(mem://): %v", err)
	}
	if _, ok := bs.(*memstore.Store); !ok {
		t.Fatalf("Open(mem://) = %T, want *memstore.Store", bs)
	}
	for _, u := range []string{"nosuch://x", "/no/scheme", "::bad"} {
		if _, err := blobstore.Open(ctx, u); err == nil {
			t.Errorf("Open(%q) succeeded", u)
		}
	}
}
