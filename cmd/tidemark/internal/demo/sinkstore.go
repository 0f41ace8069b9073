package demo

import (
	"context"
	"reflect"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
)

// checkSinkStore checks that the Sink's store enforces conditional writes
// (its commits are create-if-absent writes) when it is not the Storage's
// store, whose Acquire checks it.
func checkSinkStore(ctx context.Context, cfg Config) error {
	if s, ok := cfg.Storage.(checkpoint.BlobstoreBacked); ok && sameStore(s.Blobstore(), cfg.Sink.bs) {
		return nil
	}
	_, err := blobstore.CheckConditionalWrites(ctx, cfg.Sink.bs)
	return err
}

// sameStore reports whether a and b are the same store value, without
// the panic == gives on interfaces holding an uncomparable type.
func sameStore(a, b blobstore.Blobstore) bool {
	ta := reflect.TypeOf(a)
	return ta != nil && ta == reflect.TypeOf(b) && ta.Comparable() && a == b
}
