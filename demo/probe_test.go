package demo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

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
	errIgnored     = fmt.Errorf("%w: bucket \"b\" at http://127.0.0.1:9: If-None-Match: * on an existing object succeeded", s3store.ErrConditionsIgnored)
	errUnreachable = fmt.Errorf("s3store: probe bucket \"b\" at http://127.0.0.1:9: %w", s3store.ErrUnreachable)
)

const ignoredMessage = "this endpoint does not enforce conditional writes (If-None-Match/If-Match); Tidemark's fencing would be unsafe on it: "

func TestCheckConditionalWrites(t *testing.T) {
	for _, tc := range []struct {
		name       string
		bs         blobstore.Blobstore
		wantProbed bool
		wantErr    error  // nil: no error
		wantPrefix string // of the error message
	}{
		{name: "a store without Probe is local and always enforced", bs: memstore.New()},
		{name: "an endpoint that enforces them", bs: &probing{Blobstore: memstore.New()}, wantProbed: true},
		{name: "an endpoint that ignores them", bs: &probing{Blobstore: memstore.New(), err: errIgnored},
			wantProbed: true, wantErr: s3store.ErrConditionsIgnored, wantPrefix: ignoredMessage},
		{name: "an endpoint that could not be probed", bs: &probing{Blobstore: memstore.New(), err: errUnreachable},
			wantProbed: true, wantErr: s3store.ErrUnreachable, wantPrefix: "could not check that the endpoint enforces conditional writes"},
		{name: "an endpoint that ignores them behind a Meter", bs: NewMeter(&probing{Blobstore: memstore.New(), err: errIgnored}),
			wantProbed: true, wantErr: s3store.ErrConditionsIgnored, wantPrefix: ignoredMessage},
		{name: "a store without Probe behind a Meter", bs: NewMeter(memstore.New())},
	} {
		t.Run(tc.name, func(t *testing.T) {
			probed, err := CheckConditionalWrites(context.Background(), tc.bs)
			if probed != tc.wantProbed {
				t.Errorf("probed = %v, want %v", probed, tc.wantProbed)
			}
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("error %v, want none", err)
				}
				return
			}
			if !errors.Is(err, tc.wantErr) || !strings.HasPrefix(fmt.Sprint(err), tc.wantPrefix) {
				t.Fatalf("error %v: want one wrapping %v that starts %q", err, tc.wantErr, tc.wantPrefix)
			}
			if tc.wantErr != s3store.ErrConditionsIgnored && errors.Is(err, s3store.ErrConditionsIgnored) {
				t.Fatalf("error %v says the conditions are ignored; the probe only failed", err)
			}
		})
	}
}

func TestRunRefusesAStoreThatIgnoresConditionalWritesAndWritesNothing(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		storageOK, sinkOK    bool
		sameStore, meterOver bool
	}{
		{name: "one store", sameStore: true},
		{name: "one store behind a Meter", sameStore: true, meterOver: true},
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
			if tc.meterOver {
				storageBS = NewMeter(storageBS)
				sinkBS = storageBS
			}
			cfg := node(t, storageBS)
			cfg.Sink = NewSink(sinkBS)
			res, err := Run(context.Background(), cfg)
			if !errors.Is(err, s3store.ErrConditionsIgnored) || !strings.HasPrefix(err.Error(), "demo: "+ignoredMessage) {
				t.Fatalf("run: %v (result %+v): want the refusal wrapping ErrConditionsIgnored", err, res)
			}
			for _, mem := range []*memstore.Store{storageMem, sinkMem} {
				for info, err := range mem.List(context.Background(), "") {
					if err != nil {
						t.Fatal(err)
					}
					t.Errorf("the refused run wrote %q", info.Key)
				}
			}
		})
	}
}

func TestRunProbesItsStoreOnceThroughTheMeter(t *testing.T) {
	p := &probing{Blobstore: memstore.New()}
	m := NewMeter(p)
	cfg := node(t, m)
	cfg.Records = 2000
	mustComplete(t, cfg)
	if n := p.calls.Load(); n != 1 {
		t.Fatalf("Probe called %d times, want once (the Storage and the Sink share the store)", n)
	}
}
