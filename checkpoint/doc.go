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
// directories — plus the files in those directories, under
// Storage.StateDir(id). A record is prepared (state durable, sink
// transaction not known to be committed) or completed (safe to restore).
// Ids sort, as strings, in creation order: NewID builds them ("ckpt-" and
// 20 digits), NextID continues a sequence, ValidateID checks one.
//
// Storage is the persistence interface. FileStorage implements it on a
// local directory, package blobstorage on any Blobstore. Pointers never
// move backwards, and a record is durable before a pointer names it.
// Records are untrusted input: DecodeRecord checks MaxRecordBytes,
// MaxOwners and the other limits on the raw bytes before decoding, and a
// refusal wraps ErrRecordTooLarge.
//
// A Storage may have optional capabilities, each a named interface:
// WriterRole, Restorer, ArchiveSource, RemoteImporter, StateDirRemover and
// BlobstoreBacked. blobstorage.Storage has them all; FileStorage has none.
//
// # The two-phase protocol
//
// Coordinator collects the source offsets, the operator state and the
// sink's prepared transaction, then on its own goroutine saves the record
// as prepared (the logged commit decision), commits the sink, rewrites
// the record as completed and commits the offsets. Coordinator.Hook fires
// after each step. A failure wrapping ErrFenced aborts nothing: the
// writer that fenced this one owns every transaction decision.
//
// Recover decides where a job resumes: it restores the latest completed
// checkpoint, or promotes a prepared one whose transaction committed.
// Roll forward, as package job does: the CommittedFunc commits the
// prepared transaction (idempotently) and answers yes.
//
// The steps, the recovery table and why each window is safe are in
// docs/architecture.md ("The checkpoint package"); the savepoint
// functions (CreateSavepoint, CopySavepoint, RestoreSavepoint,
// DeleteSavepoint, ExportSavepoint) in docs/savepoints.md.
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
