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
// # One process: the job runtime
//
// [Run] is a user of package job like any other: the word count is a
// job.Processor over the state's owners, the generated source a
// job.Source (offsets as JSON), and the output a job.BlobSink under
// [OutputPrefix] of the sink's store. The runtime owns the writer role,
// recovery (rolling a prepared checkpoint forward), the state, the
// checkpoints every Config.Interval (or Config.EveryRecords), commits,
// GC and the stop with a final checkpoint (Config.Stop). At the end of
// the source Run reads the final checkpoint's state back from the store
// and the committed output of the job's [Lineage], and compares both
// with the counts computed from the source ([Check]). The lineage lives
// in the state (the totals owner), the output base in [BaseKey].
//
// # Workers: the demo's own wiring, until the runtime has a worker mode
//
// [RunWorkers] still drives a checkpoint.Coordinator itself, with the
// demo's [Sink]: a transactional file sink whose commit and abort race
// for one create-if-absent key, so that recovery's "not committed" is a
// durable abort no zombie's late commit can pass (see [Sink]).
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
