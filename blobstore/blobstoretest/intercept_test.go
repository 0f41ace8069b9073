package blobstoretest_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
	"github.com/tidemark-io/tidemark/blobstore/memstore"
)

// An Interceptor with no hooks is a conforming decorator.
func TestInterceptorIsADecorator(t *testing.T) {
	blobstoretest.RunDecorator(t, func(t *testing.T, bs blobstore.Blobstore) (blobstore.Blobstore, string) {
		return blobstoretest.Intercept(bs, blobstoretest.Hooks{}), ""
	})
}

// Before fails a call without reaching the store; After sees and replaces
// the error; Read wraps what a get's caller reads; calls and bytes count.
func TestInterceptorHooks(t *testing.T) {
	ctx := t.Context()
	errInjected := errors.New("injected")
	base := memstore.New()
	i := blobstoretest.Intercept(base, blobstoretest.Hooks{
		Before: func(_ context.Context, c *blobstoretest.Call) error {
			if c.Key == "refused" {
				return errInjected
			}
			return nil
		},
		After: func(c *blobstoretest.Call, err error) error {
			if c.Op == blobstore.OpGet && errors.Is(err, blobstore.ErrNotFound) {
				return errors.Join(err, errInjected)
			}
			return err
		},
		Read: func(_ *blobstoretest.Call, r io.Reader) io.Reader { return io.LimitReader(r, 2) },
	})
	if err := i.Put(ctx, "refused", strings.NewReader("x")); !errors.Is(err, errInjected) {
		t.Fatalf("Put(refused) = %v, want the injected error", err)
	}
	if ok, _ := base.Exists(ctx, "refused"); ok {
		t.Fatal("a refused Put reached the store")
	}
	if err := i.Put(ctx, "k", strings.NewReader("abcd")); err != nil {
		t.Fatal(err)
	}
	rc, err := i.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != "ab" {
		t.Fatalf("Get through Read read %q, want %q", b, "ab")
	}
	if _, err := i.Get(ctx, "missing"); !errors.Is(err, errInjected) || !errors.Is(err, blobstore.ErrNotFound) {
		t.Fatalf("Get(missing) = %v, want ErrNotFound joined by After", err)
	}
	for range i.List(ctx, "") {
	}
	if n := i.Count(blobstore.OpPut); n != 2 {
		t.Errorf("Count(OpPut) = %d, want 2", n)
	}
	if n := i.Count(); n != 5 {
		t.Errorf("Count() = %d, want 5 (2 puts, 2 gets, 1 list)", n)
	}
	if up, down := i.Bytes(); up != 4 || down != 2 {
		t.Errorf("Bytes() = %d up, %d down; want 4 and 2", up, down)
	}
	calls := i.Calls()
	if len(calls) != 5 || calls[0].Key != "refused" || calls[4].Op != blobstore.OpList || calls[4].Seq != 5 {
		t.Errorf("Calls() = %+v", calls)
	}
}

// digestBody is a body that knows its digest.
type digestBody struct{ io.Reader }

func (digestBody) SHA256() (d [sha256.Size]byte) { return d }

// A put's body keeps its digest through an Interceptor.
func TestInterceptorKeepsTheBodyDigest(t *testing.T) {
	var got bool
	base := blobstoretest.Intercept(memstore.New(), blobstoretest.Hooks{
		Before: func(_ context.Context, c *blobstoretest.Call) error {
			_, got = c.Body.(blobstore.DigestReader)
			return nil
		},
	})
	i := blobstoretest.Intercept(base, blobstoretest.Hooks{})
	if err := i.Put(t.Context(), "k", digestBody{strings.NewReader("v")}); err != nil {
		t.Fatal(err)
	}
	if !got {
		t.Fatal("the body reached the store without its SHA256")
	}
}
