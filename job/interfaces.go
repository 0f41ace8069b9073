package job

import (
	"context"

	"github.com/tidemark-io/tidemark/state"
)

// Record is one record of a job's input or output.
type Record struct {
	Key   []byte
	Value []byte
}

// Txn names the sink transaction of one checkpoint: the checkpoint's id
// and the writer that opened it: "e<epoch>" for the epoch of the writer
// role, or "r<random hex>" for a run on a Storage without one. Every run
// has its own writer, so two runs that use the same checkpoint id (a
// zombie and the node that replaced it, or a run and its restart) open
// different transactions.
type Txn struct {
	ID     string // checkpoint id
	Writer string // "e<epoch>" or "r<hex>"
}

// String returns "<id>@<writer>".
func (t Txn) String() string { return t.ID + "@" + t.Writer }

// Source is a replayable input: a log the runtime can seek.
//
// The runtime calls it from one goroutine. Offsets is called at every
// barrier, between two calls of Next; the bytes it returns are stored in
// the checkpoint and handed back to Seek on recovery, on any node.
type Source interface {
	// Seek positions the source just after the records that offsets (a
	// value Offsets returned) cover. A nil offsets means the beginning.
	// Called once, before the first Next.
	Seek(ctx context.Context, offsets []byte) error
	// Next returns the next batch of records. It may return an empty
	// batch when nothing arrived for a while (checkpoints are taken
	// between calls). io.EOF ends a bounded source: the records returned
	// with it are processed, then the runtime takes a final checkpoint
	// and returns. It must return soon after ctx is done, with no
	// records: Job.Stop cancels it to drain (records returned with any
	// other error are dropped).
	Next(ctx context.Context) ([]Record, error)
	// Offsets returns the position after the last record Next returned,
	// as a JSON document (tidemark show prints it as it is); empty means
	// the beginning. Anything else that is not valid JSON fails the
	// checkpoint at its barrier, which stops the job.
	Offsets() ([]byte, error)
}

// Processor applies the job's logic to one batch.
//
// Process runs on the runtime's goroutine, between barriers. Its writes
// to st and the records it returns belong to the current checkpoint:
// after a crash they are both rolled back to the checkpoint restored and
// the batch is read again, so Process must be deterministic given st and
// in, and must have no other side effects.
type Processor interface {
	Process(ctx context.Context, st *state.Store, in []Record) (out []Record, err error)
}

// Sink is a transactional output, one transaction per checkpoint.
//
// The contract is roll-forward, as Flink's two-phase commit sinks: once
// the runtime has persisted a checkpoint as prepared, that record is the
// commit decision, binding on every writer. Recovery on any node commits
// the prepared checkpoint's transaction again, and a zombie that wakes
// late commits the same transaction, so Commit must be idempotent. No
// transaction named by a prepared record is ever aborted.
//
// A sink must key its transactions by the whole Txn, ID and Writer,
// never by ID alone: an id whose record was never persisted (the writer
// died after Write or Prepare) is used again by the next writer, unless
// the sink is a Sweeper that reports it.
//
// Of all the transactions of one id, at most one is ever committed (the
// one its persisted record names), and ids sort in checkpoint order
// (checkpoint.NewID): a reader that needs the output in order reads the
// committed transactions by id.
type Sink interface {
	// Write adds records to the open transaction txn, in order; it is
	// called for each batch with output. Nothing written is visible to
	// readers of the output before Commit. An error stops the job.
	Write(ctx context.Context, txn Txn, recs []Record) error
	// Prepare makes everything written to txn durable, still invisible,
	// and committable from any node: after Prepare returns nil, Commit
	// of txn must succeed later even if this process dies now. Called
	// once per transaction, before the checkpoint is persisted, also for
	// a transaction nothing was written to.
	Prepare(ctx context.Context, txn Txn) error
	// Commit makes txn's output visible, atomically. It must be
	// idempotent: it may be called again after a crash, a lost
	// response, by recovery on another node, and by a zombie after the
	// takeover, possibly concurrently; each call after the first must
	// succeed and change nothing. An error stops the run (the
	// Coordinator fails); the record stays prepared, so the next run's
	// recovery commits txn again before it reads anything.
	Commit(ctx context.Context, txn Txn) error
	// Abort discards txn, which no prepared record names: its checkpoint
	// failed before it was persisted. Called at most once per txn, best
	// effort; a sink may also discard such leftovers itself.
	Abort(ctx context.Context, txn Txn) error
}

// Sweeper is an optional interface of a Sink: the runtime's hook to clean
// up after dead writers. BlobSink implements it.
//
// Sweep is called once per run, at start: after recovery committed the
// transaction of the prepared record (if any), before the first Write.
// writer is the new run's Txn.Writer. Sweep may delete the transactions
// of other writers that were never committed, except those of a newer
// writer ("e<n>" with a greater n: it fenced this one, and a record it
// persists later may name them); it must never delete a committed
// transaction nor anything a record could still name. It returns the
// greatest checkpoint id it has seen, staged or committed ("" if none):
// the runtime's ids start after it, so no id is reused. An error stops
// the run before anything is read.
type Sweeper interface {
	Sweep(ctx context.Context, writer string) (lastID string, err error)
}
