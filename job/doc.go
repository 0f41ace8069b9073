// Package job is Tidemark's job runtime: a user's source, processor and
// sink in; recovery, state, checkpoints, exactly-once commits and stops
// with a savepoint out. Run (or Start, then Job.Stop) owns the whole
// integration path that checkpoint.Coordinator leaves to its caller.
//
// # What the runtime calls, and when
//
// One goroutine runs the job. At start it takes the writer role, recovers
// (below), opens the state from the checkpoint restored (never from what
// Config.Dir holds) and calls Source.Seek once with its offsets. Then it
// loops: Source.Next, Processor.Process, Sink.Write of the output into the
// open transaction. At each checkpoint (every Config.Interval or
// EveryRecords) it calls Source.Offsets (the barrier), snapshots the
// state and calls Sink.Prepare; the Coordinator then persists the record
// as prepared and calls Sink.Commit from its own goroutine, while the
// loop already writes the next transaction. At most one checkpoint is in
// flight. Source and Processor are called from the job's goroutine only;
// Sink.Commit may run concurrently with Write and Prepare of a later
// transaction, and, at recovery or from a zombie, on another node.
//
// # The sink contract: roll forward
//
// Once a checkpoint is persisted as prepared, that record is the commit
// decision, binding on every writer. Recovery on any node commits the
// prepared checkpoint's transaction again (it is named by the record:
// Txn{ID, Writer}) and restores it; a zombie that wakes late in the
// two-phase window commits that same transaction. So Commit must be
// idempotent, and after Prepare returned nil it must be able to succeed
// from any node. This is Flink's TwoPhaseCommitSinkFunction contract.
// The other choice, a durable abort that a late commit cannot pass,
// needs the sink to arbitrate each transaction with a create-if-absent
// decision and lets recovery veto the record; rolling forward needs only
// an idempotent commit, which every transactional store can give.
//
// Abort is called only for a transaction that no record can name: its
// checkpoint failed before Prepare returned. After Prepare the runtime
// never aborts, because a failed persist of the prepared record may have
// landed (the response was lost) and commits on recovery. Transactions
// of writers that died before persisting are garbage a sink may drop
// once no record can name them: a sink that is a Sweeper (BlobSink is)
// does at recovery. Write never reopens a transaction of an earlier run:
// every run has its own writer, and a sink keys transactions by the
// whole Txn, because an id whose record was never persisted is reused.
//
// # Crashes, zombies, restarts
//
// A crash anywhere is safe: the next run, on the same disk or an empty
// node, restores the latest checkpoint, re-reads from its offsets and
// writes into new transactions. A run owns Config.Dir alone (a flock):
// a paused process on the same disk is refused there, not shared with. A writer fenced by a newer one stops at
// once with an error wrapping checkpoint.ErrFenced, aborting nothing.
// BlobSink is a Sink on any Blobstore that follows this contract.
//
// # Jobs spanning hosts
//
// RunCoordinator and RunWorker run one job over several processes: a
// coordinator (holding the writer role) and one worker per slot, each
// reading its own part of the input, keeping its own state owners and
// writing its own sink transaction of every checkpoint. They reach each
// other through a Group (connector/jetstream has one over NATS) and the
// store only. At each barrier every worker saves its part
// (blobstorage.Worker.SavePart) and prepares its transaction; the
// coordinator persists the record once every part is in and commits each
// slot's transaction under the same roll-forward contract. A failed
// barrier restarts every worker from the last completed checkpoint; a
// standby coordinator takes over by taking the writer role and leading
// the Group at its greater epoch.
//
// Workers keep their state local or in remote mode (WorkerConfig.RemoteState,
// as Config.RemoteState): a worker restarted on an empty disk, or gaining
// owners in a rescale, then opens them where their tables are, downloading
// none before its first record.
package job
