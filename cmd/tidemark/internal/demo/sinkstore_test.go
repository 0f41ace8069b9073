package demo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/memstore"
	"github.com/tidemark-io/tidemark/s3store"
)

// probing is a Blobstore with a Probe that returns err: a stand-in for an
// s3store.Store on an endpoint that enforces (nil), ignores, or cannot be
// asked about conditional writes.
type probing struct {
	blobstore.Blobstore
	err   error
	calls atomic.Int32
}

func (p *probing) Probe(context.Context) error {
	p.calls.Add(1)
	return p.err
}

// The errors s3store.Store.Probe returns, as it words them.
var (
	errIgnored = fmt.Errorf("%w: bucket \"b\" at http://127.0.0.1:9: If-None-Match: * on an existing object succeeded", s3store.ErrConditionsIgnored)
)

func TestRunRefusesAStoreThatIgnoresConditionalWritesAndWritesNothing(t *testing.T) {
	for _, tc := range []struct {
		name                string
		storageOK, sinkOK   bool
		sameStore, observed bool
	}{
		{name: "one store", sameStore: true},
		{name: "one store behind an observer", sameStore: true, observed: true},
		{name: "the checkpoints' store", sinkOK: true},
		{name: "the sink's store", storageOK: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errOf := func(ok bool) error {
				if ok {
					return nil
				}
				return errIgnored
			}
			storageMem, sinkMem := memstore.New(), memstore.New()
			var storageBS, sinkBS blobstore.Blobstore = &probing{Blobstore: storageMem, err: errOf(tc.storageOK)}, &probing{Blobstore: sinkMem, err: errOf(tc.sinkOK)}
			if tc.sameStore {
				sinkMem, sinkBS = storageMem, storageBS
			}
			if tc.observed {
				storageBS = blobstore.Observe(storageBS, nopObserver{})
				sinkBS = storageBS
			}
			cfg := node(t, storageBS)
			cfg.Sink = NewSink(sinkBS)
			res, err := Run(t.Context(), cfg)
			if !errors.Is(err, s3store.ErrConditionsIgnored) || !strings.Contains(err.Error(), "does not enforce conditional writes") {
				t.Fatalf("run: %v (result %+v): want the refusal wrapping ErrConditionsIgnored", err, res)
			}
			for _, mem := range []*memstore.Store{storageMem, sinkMem} {
				for info, err := range mem.List(t.Context(), "") {
					if err != nil {
						t.Fatal(err)
					}
					t.Errorf("the refused run wrote %q", info.Key)
				}
			}
		})
	}
}

func TestRunProbesItsStoreOnceThroughAnObserver(t *testing.T) {
	p := &probing{Blobstore: memstore.New()}
	m := blobstore.Observe(p, nopObserver{})
	cfg := node(t, m)
	cfg.Records = 2000
	mustComplete(t, cfg)
	if n := p.calls.Load(); n != 1 {
		t.Fatalf("Probe called %d times, want once (the Storage and the Sink share the store)", n)
	}
}

// nopObserver observes nothing.
type nopObserver struct{}

func (nopObserver) Transferred(blobstore.Op, string, int)                  {}
func (nopObserver) Done(blobstore.Op, string, int64, time.Duration, error) {}
