// Package checkpoint persists the state of a stream-processing pipeline
// and coordinates it with a transactional sink, so that a pipeline that
// fails anywhere resumes with nothing lost and nothing applied twice. It
// also turns checkpoints into savepoints: named, self-contained archives
// in a blobstore.Blobstore.
//
// # Checkpoints
//
// A checkpoint is a CheckpointData record — operator state, source
// offsets, the sink's transactional id, references to native state
// directories — plus the files in those directories, which live under
// Storage.StateDir(id). A record is either prepared (state durable, sink
// transaction not known to be committed) or completed (safe to restore).
//
// Checkpoint ids sort, as strings, in creation order; the pointers a
// Storage keeps rely on it. NewID builds such ids from a sequence number
// ("ckpt-" and 20 zero-padded digits) and NextID continues a sequence.
// ValidateID says which strings can be ids at all: one path segment, no
// separators, no "..".
//
// # Storage
//
// Storage is the persistence interface; FileStorage implements it on a
// local directory:
//
//	<dir>/<id>.json              record, written temp → fsync → rename → fsync dir
//	<dir>/<id>.state/<owner>/…   native state directories of checkpoint id
//	<dir>/latest.json            pointer to the newest checkpoint (any status)
//	<dir>/latest-completed.json  pointer to the newest completed checkpoint
//
// Pointers never move backwards, and a record is durable before a pointer
// names it. SweepOrphans removes state directories without a record.
//
// # Records are untrusted input
//
// A record may come from a savepoint made elsewhere or from an object
// anyone with write access can replace. DecodeRecord checks the record
// limits on the raw bytes before decoding: MaxRecordBytes, MaxOwners,
// MaxOperators, MaxSourceEntries, MaxNameBytes and MaxValueBytes
// (blobstorage adds MaxRecordFiles and MaxRemoteObjects). Every Storage
// checks them before it writes a record too, so what is saved can be
// read. A refusal wraps ErrRecordTooLarge. Within the limits, decoding
// or restoring the largest record peaks under 3 × MaxRecordBytes +
// 16 MiB of heap, the bound of an archive's manifest.
//
// # Checkpoints in the object store
//
// BlobStorage implements Storage on any blobstore.Blobstore, so a job on
// an ephemeral node keeps nothing that matters on its own disk:
//
//	checkpoints/<id>/checkpoint.json                  record + every file's key, size, SHA-256
//	checkpoints/<id>/private/e<epoch>/<owner>/…       files of one checkpoint (MANIFEST, OPTIONS, WAL)
//	shared/<owner>/<id>-e<epoch>/<path>               immutable files (SSTs), uploaded once, shared
//	_latest, _latest-completed                        pointers {"id","epoch"}, moved by compare-and-swap
//	_writer                                           the writer epoch (fencing)
//	pins/<id>/<nonce>                                 restores in progress
//
// A writer takes the role with Acquire: it raises the epoch in _writer by
// compare-and-swap and rewrites both pointers with it. Every later pointer
// move is a compare-and-swap that refuses a pointer carrying a newer
// epoch, and every delete first checks _writer, so a writer that lost the
// role (a zombie) gets ErrFenced and can do no further harm.
//
// Save uploads the state directories in parallel, hashing each file in the
// same pass as its upload. An immutable file that an earlier checkpoint
// of this writer already uploaded — recognised by its inode, since Pebble
// checkpoints hard-link unchanged SSTs — is referenced, not uploaded
// again, so an incremental checkpoint costs what changed. Restore (or
// Materialize, which does nothing for a FileStorage) downloads a
// checkpoint into StateDir(id) on a node with an empty disk, verifying
// every size and digest, and pins it while it reads. GC keeps the newest
// completed checkpoints and everything they use, deletes a record before
// its files, and removes what crashed saves left behind only after a
// grace period.
//
// # The two-phase protocol
//
// Coordinator collects three inputs per checkpoint, in any order — the
// source offsets at barrier injection (OnBarrierInjected), the operator
// state at the pre-sink tap (OnStateSnapshot), and the sink's
// acknowledgement that the checkpoint's output is staged in an open
// transaction (OnSinkPrepared) — and then, on its own worker goroutine:
//
//  1. saves the record as prepared (the logged commit decision)  [StepPersistPrepared]
//  2. commits the sink transaction                                [StepSinkCommitted]
//  3. rewrites the record as completed                            [StepPersistCompleted]
//  4. calls OnCompleted, then commits source offsets externally
//     (advisory: a failure is logged, not fatal)                  [StepOffsetsCommitted]
//
// A failure before step 2 calls AbortSink, if set; any failure is
// reported once on Fatal and stops the coordinator. A roll-forward job
// leaves AbortSink nil: a failed save of the prepared record may have
// landed (the response was lost), and then that record commits. Coordinator.Hook
// fires after each step and can inject a failure (HookFail) or a crash
// (HookHalt) there; the crash-window tests do so at every step.
//
// A failure wrapping ErrFenced aborts nothing, at any step: a fenced
// writer is a zombie, and the writer that fenced it owns every
// transaction decision. The new writer may even be using the same
// checkpoint id (the zombie never moved _latest to it), and an abort by
// the zombie would abort the new writer's transaction of that id and
// fail its commit. The zombie only reports the error on Fatal and stops;
// the new writer's recovery decides whatever the zombie left open. For
// the same reason a sink should name its transactions per writer (the
// job package's BlobSink stages under <id>@<writer> and a commit names the
// staged object and digest it commits), so that two writers using one id
// never commit each other's output.
//
// # Recovery
//
// After a failure, Recover looks at the latest checkpoint of any status
// (Storage.Load) and, when it is prepared, asks the sink whether its
// transaction committed. The protocol guarantees at most one prepared
// checkpoint newer than the latest completed one, because the next
// checkpoint is persisted only after the previous one completed.
//
//	latest (Load)  its txn committed?  latest completed   decision
//	-------------  ------------------  ----------------   --------------------------------------------
//	none           (not asked)         none               ActionStartFresh
//	none           (not asked)         C                  ActionRestore C (pointer damage; best effort)
//	completed L    (not asked)         L                  ActionRestore L
//	prepared P     yes                 any                ActionPromote: UpdateStatus(P, completed), restore P
//	prepared P     no                  C                  ActionRestore C; P abandoned (sink aborts its txn)
//	prepared P     no                  none               ActionStartFresh; P abandoned
//	prepared P     error               any                error: no decision is made
//	prepared P     nil CommittedFunc   as for "no"        the sink cannot prove a commit: never promote
//
// Promoting P when its transaction committed is what makes the window
// between steps 2 and 3 safe: P's output is visible, so restoring C would
// replay and duplicate it. Restoring C when P's transaction did not
// commit is what makes the window between steps 1 and 2 safe: P's output
// was never visible, and replaying from C's offsets produces it exactly
// once. The next id is NextID(Decision.Latest.ID), never an abandoned one.
//
// A "no" is safe only if it is final: a zombie frozen between steps 1 and
// 2 still commits when it wakes, after recovery replayed P's output. A
// read-only CommittedFunc therefore duplicates output. Roll forward
// instead, as package job does (Flink's contract): the prepared record is
// the logged commit decision, binding on every writer, so the
// CommittedFunc commits P's transaction (idempotently: the zombie's late
// commit changes nothing) and answers yes. Package job states that sink
// contract; ExampleCoordinator shows the same path by hand.
//
// # Savepoints
//
// ArchiveCheckpoint writes a checkpoint — record and a real copy of each
// state directory under state/<owner>/… — as a portable, checksummed
// archive (package archive); ExtractCheckpoint materializes one into a
// Storage as its latest completed checkpoint. Savepoints live under
// SavepointKey(label) = "savepoints/<label>" in a Blobstore, stored by
// content (package savepoint): CreateSavepoint uploads only the files the
// store's savepoint area lacks, RestoreSavepoint extracts one into another
// Storage, CopySavepoint sends one to another Blobstore (another bucket,
// region, or a filesystem) sending only what it lacks and verifying every
// digest, DeleteSavepoint frees only what no other savepoint uses, and
// ExportSavepoint and ImportSavepoint write and read the portable archive.
// Savepoints stored whole as one archive, before the savepoint area, are
// read by all of them. A label is a single key segment (ValidateLabel).
// CreateSavepoint and CopySavepoint replace a savepoint of the label;
// CreateNewSavepoint and CopyNewSavepoint write its manifest with
// PutIfAbsent and fail with ErrSavepointExists instead, changing no
// savepoint, and a new label must pass the stricter ValidateNewLabel.
//
// # Errors
//
// Errors wrap sentinels so callers branch with errors.Is: ErrNotFound (no
// such checkpoint), ErrInvalidID, ErrInvalidLabel, ErrNoCompleted
// (nothing to make a savepoint of), ErrInjected (a hook's HookFail),
// ErrFenced (another writer took over), ErrNotWriter (a write without
// Acquire), and ErrBlobNotFound (= blobstore.ErrNotFound, a missing
// savepoint). A corrupt object or archive wraps archive.ErrCorrupt.
package checkpoint
