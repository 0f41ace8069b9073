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
// [RunWorkers] runs the same job on the runtime's multi-host shape: this
// process runs job.RunCoordinator, and Workers processes ([ServeWorker])
// run job.RunWorker, reaching each other through a connector/jetstream
// Group on a NATS server and the store only. The source has
// [DefaultOwners] partitions, partition p yielding the words of owner p;
// slot k reads the partitions p with p % Workers == k, keeps their owners
// and commits through its own job.BlobSink ([SlotOutputPrefix]). The
// coordinator publishes the job's description in a key-value bucket, and
// a worker learns from it the store and its partitions. A dead worker is
// started again by the [Launcher]; a run with another number of workers
// rescales (the offsets of every partition are merged). A job keeps its
// shape: Run refuses a job with workers, RunWorkers one run in one
// process, both before writing anything. The final check restores every
// owner from the store and sums every slot's committed output.
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
