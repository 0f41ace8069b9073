package blobstore_test

import (
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
)

// nopObserver observes nothing.
type nopObserver struct{}

func (nopObserver) Transferred(blobstore.Op, string, int)                  {}
func (nopObserver) Done(blobstore.Op, string, int64, time.Duration, error) {}

// Every decorator of package blobstore, alone and stacked, passes the
// conformance suite and forwards every capability.
func TestDecorators(t *testing.T) {
	prefix := func(t *testing.T, bs blobstore.Blobstore, p string) blobstore.Blobstore {
		d, err := blobstore.WithPrefix(bs, p)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	cases := map[string]func(t *testing.T, bs blobstore.Blobstore) (blobstore.Blobstore, string){
		"WithPrefix": func(t *testing.T, bs blobstore.Blobstore) (blobstore.Blobstore, string) {
			return prefix(t, bs, "jobs/a"), "jobs/a/"
		},
		"Observe": func(t *testing.T, bs blobstore.Blobstore) (blobstore.Blobstore, string) {
			return blobstore.Observe(bs, nopObserver{}), ""
		},
		"WithResumingReads": func(t *testing.T, bs blobstore.Blobstore) (blobstore.Blobstore, string) {
			return blobstore.WithResumingReads(bs, 3), ""
		},
		"ObserveOverWithPrefix": func(t *testing.T, bs blobstore.Blobstore) (blobstore.Blobstore, string) {
			return blobstore.Observe(prefix(t, bs, "jobs/a"), nopObserver{}), "jobs/a/"
		},
		"PrefixOverObservedResuming": func(t *testing.T, bs blobstore.Blobstore) (blobstore.Blobstore, string) {
			inner := blobstore.WithResumingReads(blobstore.Observe(bs, nopObserver{}), 3)
			return prefix(t, prefix(t, inner, "b"), "c/d"), "b/c/d/"
		},
	}
	for name, wrap := range cases {
		t.Run(name, func(t *testing.T) { blobstoretest.RunDecorator(t, wrap) })
	}
}
