// Package demo is the engine of `tidemark demo`: a keyed-aggregation job
// (word counts) that runs on Tidemark's checkpoints, importable by tests.
//
// # The job
//
// A [Source] generates a deterministic, replayable stream of words:
// record i is always the same word, so seeking to an offset replays
// exactly what was read from there before, like a partitioned log. The
// job folds each batch of records into keyed state (package state: one
// Pebble database per owner, the word counts and the record total) and
// into the output of the current checkpoint: the count each word gained
// since the previous one.
//
// # Checkpoints and the two-phase protocol
//
// Every Config.Interval (or Config.EveryRecords) the job cuts a
// checkpoint between two batches and hands its three parts to a
// checkpoint.Coordinator: the source offsets, the state (a native Pebble
// checkpoint into Storage.StateDir(id)) and the sink's acknowledgement
// that the output is staged. The Coordinator persists the checkpoint as
// prepared (uploading the state when the Storage is a
// blobstorage.Storage), commits the sink transaction, and persists the
// checkpoint as completed.
//
// # The sink
//
// [Sink] is a transactional file sink in a blobstore.Blobstore: one
// transaction per checkpoint, staged as a file and committed by creating
// the committed file with a single create-if-absent, which also makes
// "was it committed?" a durable, node-independent question (see [Sink]).
// The staged file is per writer (sink/staged/<id>@e<epoch>) and the
// committed file names the staged file and digest it commits, so a node
// that was cut off and replaced (a zombie), using the same checkpoint id
// as its replacement, can never get its output committed in the
// replacement's name.
//
// # Recovery
//
// [Run] starts by taking the writer role (fencing any previous writer;
// Acquire first checks that the store enforces conditional writes, since
// an S3-compatible endpoint may accept If-None-Match and If-Match and
// ignore them, and then nothing fences a zombie),
// lets checkpoint.Recover decide from the latest checkpoint and the sink
// what to restore, aborts every transaction that can no longer commit,
// materializes the state (downloading it on an empty node), seeks the
// source and continues. Whatever point the previous run died at, the
// committed output ends up holding every record exactly once: at the end
// Run recomputes the expected counts from the source and compares them
// with the sum over the committed transactions and with the state
// ([CheckExactlyOnce]). After a rollback to a savepoint on the same store
// that sum is over the transactions of the job's current [Lineage]: the
// output an abandoned lineage committed after the savepoint is produced
// again by the new one, and is left out.
//
// # Remote state (instant restore)
//
// With Config.RemoteState ([RemoteStateAll] or [RemoteStateLower]; the
// CLI's --remote-state) the state runs in state's remote mode on the
// Storage's own Blobstore: Pebble creates its tables under
// blobstorage.RemotePrefix, labelled by the writer epoch
// (blobstorage.RemoteGeneration), the Storage records them in each
// checkpoint instead of uploading them (UseRemote), and GC keeps what
// the live state and the retained checkpoints use. A resume on an empty
// node downloads only the local part, opens at once and hydrates the
// secondary cache in the background. The operator state records the
// mode: a checkpoint in remote state resumed in local mode is refused
// with [ErrStateMode] before the writer role is taken (Pebble cannot
// open its tables without the store); local state resumed in remote mode
// continues (its tables stay local and are uploaded as before, new ones
// go to the store), and either level setting opens the other's state.
//
// # Resuming in another store
//
// A savepoint created on one store, copied to another (another bucket or
// region) and restored there resumes the job in that store. The state it
// restores counts every record before the savepoint, but the sink output
// of those records stays in the first store. Run recognises this start
// (the restored checkpoint is completed, yet this store's sink holds no
// committed output at or below it), records the savepoint's offset in the
// marker [BaseKey] before committing anything, and from then on checks
// the state against every record and this store's committed output
// against the records from that offset on ([Base]); the verdict says so.
//
// # Workers
//
// [RunWorkers] runs the same job as a coordinator and several worker
// processes ([ServeWorker]) connected over TCP (JSON messages, one per
// line). The state is split into [DefaultOwners] owners (words hashed to
// owners), each a state.Store on the worker holding it; owner i goes to
// worker slot i mod Workers. The coordinator holds the writer role, reads
// the source, sends each batch to the workers of its words and stages
// the output they report; at every checkpoint it sends a barrier, each
// worker checkpoints its owners and saves them with
// blobstorage.Worker.SavePart, and the coordinator's checkpoint.Coordinator
// persists the checkpoint from the parts (blobstorage.Storage.Assign)
// and commits the sink as [Run] does. A worker lost (connection broken or
// a request timed out) is replaced by a new one (a new worker id) for its
// slot; every worker rolls back to the latest completed checkpoint,
// survivors from their own disks and the newcomer by restoring only its
// owners from the store. A run with another number of workers restores
// each owner on its new worker: rescale (at most one worker per owner).
// A job keeps its shape: one run with workers is refused by Run, one run
// in one process by RunWorkers, both before writing anything. A worker
// whose slot is out of range is refused with the reason, which
// ServeWorker returns wrapping [ErrWorkerRefused]. The final check
// restores every owner from the store.
//
// # Errors
//
// Run's errors wrap [ErrCrashed] (an injected crash: run again to
// resume), blobstore.ErrConditionsIgnored (the endpoint ignores
// conditional writes: the run wrote nothing), [ErrNotExactlyOnce] (the final check failed), [ErrJobMismatch]
// (the store holds a job with other parameters, or of the other shape:
// the message says how to resume), [ErrStateMode] (remote
// state resumed in local mode: nothing changed), checkpoint.ErrFenced
// (another writer took over: the run stops at once, with a message that
// starts "demo: fenced: another node took over", and aborts nothing) or
// the context's error.
package demo
