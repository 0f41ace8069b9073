package demo

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/s3store"
)

// Prober is implemented by a Blobstore whose conditional writes are
// enforced by a remote endpoint that may silently ignore them
// (s3store.Store): Probe checks that they are enforced. Stores without it
// (filestore, memstore) enforce their conditions locally.
type Prober interface {
	Probe(ctx context.Context) error
}

// unwrapper is implemented by Blobstore decorators that can give back the
// store they wrap (Meter), so that wrapping a store does not hide its
// Probe.
type unwrapper interface {
	Unwrap() blobstore.Blobstore
}

// msgConditionsIgnored starts the message of the error
// CheckConditionalWrites returns for an endpoint that ignores conditional
// writes.
const msgConditionsIgnored = "this endpoint does not enforce conditional writes (If-None-Match/If-Match); Tidemark's fencing would be unsafe on it"

// CheckConditionalWrites checks, before anything relies on them, that bs
// enforces conditional writes: fencing (the writer epoch), the checkpoint
// pointers and the sink's commits are all compare-and-swap or
// create-if-absent writes, and an endpoint that accepts the headers but
// ignores them would let a zombie overwrite its successor's pointers
// without anyone noticing.
//
// It calls the Probe of bs, or of the store a decorator such as Meter
// wraps (see Prober), and reports whether there was one to call: false
// with a nil error means the store's conditions are local and always
// enforced. An endpoint that ignores the conditions is an error wrapping
// s3store.ErrConditionsIgnored whose message starts with
// msgConditionsIgnored; a probe that could not finish (endpoint
// unreachable, access denied, missing bucket) is an error saying that the
// conditions could not be checked, wrapping the probe's error. The
// message has no package prefix: callers add their own.
func CheckConditionalWrites(ctx context.Context, bs blobstore.Blobstore) (probed bool, err error) {
	p, ok := findProber(bs)
	if !ok {
		return false, nil
	}
	switch err := p.Probe(ctx); {
	case err == nil:
		return true, nil
	case errors.Is(err, s3store.ErrConditionsIgnored):
		return true, fmt.Errorf("%s: %w", msgConditionsIgnored, err)
	default:
		return true, fmt.Errorf("could not check that the endpoint enforces conditional writes (If-None-Match/If-Match): %w", err)
	}
}

// findProber returns the Prober of bs or of the stores it wraps.
func findProber(bs blobstore.Blobstore) (Prober, bool) {
	for bs != nil {
		if p, ok := bs.(Prober); ok {
			return p, true
		}
		u, ok := bs.(unwrapper)
		if !ok {
			break
		}
		bs = u.Unwrap()
	}
	return nil, false
}

// storeOf is implemented by a checkpoint.Storage on a Blobstore
// (BlobStorage).
type storeOf interface {
	Blobstore() blobstore.Blobstore
}

// checkStores runs CheckConditionalWrites on the stores of cfg that
// conditional writes go to: the Storage's (its writer epoch and pointers)
// and the Sink's (its commits), once when they are the same store.
func checkStores(ctx context.Context, cfg Config) error {
	var stores []blobstore.Blobstore
	if s, ok := cfg.Storage.(storeOf); ok && s.Blobstore() != nil {
		stores = append(stores, s.Blobstore())
	}
	if len(stores) == 0 || !sameStore(stores[0], cfg.Sink.bs) {
		stores = append(stores, cfg.Sink.bs)
	}
	for _, bs := range stores {
		if _, err := CheckConditionalWrites(ctx, bs); err != nil {
			return err
		}
	}
	return nil
}

// sameStore reports whether a and b are the same store value, without
// the panic == gives on interfaces holding an uncomparable type.
func sameStore(a, b blobstore.Blobstore) bool {
	ta := reflect.TypeOf(a)
	return ta != nil && ta == reflect.TypeOf(b) && ta.Comparable() && a == b
}
