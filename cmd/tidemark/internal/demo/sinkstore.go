package demo

import (
	"context"
	"errors"
	"reflect"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
)

// ErrCorruptOutput is returned (wrapped) for committed output that
// cannot be read back as the job wrote it.
var ErrCorruptOutput = errors.New("demo: corrupt sink output")

// Sink is the store the job's output goes to: a job.BlobSink under
// OutputPrefix in one process, one under SlotOutputPrefix per slot with
// workers.
type Sink struct{ bs blobstore.Blobstore }

// NewSink returns the sink of the job's output in bs.
func NewSink(bs blobstore.Blobstore) *Sink { return &Sink{bs: bs} }

// Output is the committed output of a job, summed.
type Output struct {
	// Counts is the sum, per word, over every committed transaction.
	Counts map[string]uint64
	// Committed counts the transactions summed in Counts; Abandoned those
	// of lineages abandoned by a rollback (see Lineage), not summed.
	Committed, Abandoned int
}

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
