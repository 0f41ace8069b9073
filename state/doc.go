// Package state is Pebble-backed keyed state for stream operators, with
// native checkpoints made of hard links and a classification of the
// checkpoint files that lets the object-store layer upload them
// incrementally.
//
// # Layout
//
// A [Store] keeps the state of several owners (operator instances) in one
// directory, one Pebble database per owner:
//
//	<dir>/<owner>/        a Pebble DB (MANIFEST-*, OPTIONS-*, *.log, *.sst, …)
//
// One database per owner, rather than one database with prefixed keys,
// makes an owner's checkpoint its own directory (which is what
// checkpoint.CheckpointData.StateDirs names), keeps owners from sharing
// compactions and file numbers, and lets an owner be dropped or moved by
// removing a directory. The owners share one block cache and one file
// cache, so memory grows with the number of owners only by their
// memtables (see [Options]).
//
// Owner ids are one path segment of 1–255 bytes of [A-Za-z0-9._-], not
// "." or ".." ([ValidateOwnerID]); anything else fails with
// [ErrInvalidOwner] before touching the disk, so an id can never name a
// directory outside the store. Ids are case-sensitive: use a
// case-sensitive filesystem.
//
// # Reads and writes
//
// [Owner.Get], [Owner.Set], [Owner.Delete], [Owner.Apply] (an atomic
// batch) and [Owner.Scan] (a prefix iterator) are safe for concurrent use.
// Writes are not fsynced by default: the durability point of a stream
// processor is the checkpoint, and whatever was written after the last
// checkpoint is replayed from the source after a failure
// ([Options.SyncWrites] changes this).
//
// # Checkpoints
//
// [Store.Checkpoint] takes a native Pebble checkpoint of every owner into
// <dir>/<owner>: SSTs are hard-linked, the MANIFEST, OPTIONS and WAL are
// copied, and the new directories and their parents are fsynced before it
// returns. Before checkpointing an owner the Store flushes its memtable
// (unless [Options.NoFlushOnCheckpoint]), so the WAL in the checkpoint is
// nearly empty and what changed since the previous checkpoint sits in new,
// immutable SSTs: an incremental upload then costs the change, not the
// memtable. Pebble's WAL recycling is turned off for the same reason: a
// recycled WAL is as long as its predecessor, stale tail included, and
// every checkpoint would upload it (see noRecycleFS). Each owner is captured at some moment during the call; for a
// consistent cut across owners the caller checkpoints while the operators
// are quiescent (at the barrier).
//
// A checkpoint directory is opened with [OpenCheckpoint], which copies it
// into a working directory first (hard links for SSTs, copies for the rest)
// because Pebble writes into the directory it opens: the checkpoint itself
// stays immutable and can be restored again.
//
// # Incremental upload
//
// [ListFiles] lists a checkpoint directory and [Classify] says which files
// are [Immutable] (Pebble SSTs *.sst and blob files *.blob: never modified
// after they are written, so they can be uploaded once and shared by later
// checkpoints) and which are [Private] (MANIFEST, OPTIONS, WAL, markers:
// belong to one checkpoint only). Private is always the safe answer.
//
// A shared file must NOT be named in the object store by its Pebble file
// name. File numbers are unique only within one database lineage: a
// database reopened from a restored checkpoint on another node (or on two
// nodes, a zombie and its successor) continues from the same next file
// number and may write a different 000123.sst than another lineage wrote.
// blobstorage.Storage therefore names a shared file by the checkpoint
// id and writer epoch that first uploaded it, which no other lineage can
// repeat, and recognises an unchanged SST in a later checkpoint by its
// inode (Checkpoint hard-links SSTs), so it is neither hashed nor
// uploaded again. [DigestFile] computes a file's SHA-256 for checks.
//
// # Remote mode (instant restore)
//
// With [Options.Remote] set, Pebble creates SSTs directly in an object
// store ([RemoteOptions]: all levels, or only L5 and L6) through
// state/remotestore, and reads them back block by block through a
// secondary cache on local disk. A checkpoint directory then holds only
// the local part: MANIFEST, OPTIONS, WAL, the remote object catalog
// (REMOTE-OBJ-CATALOG-* and its marker, which say where each remote
// table lives) and any local SSTs. [Store.RemoteObjects] lists, exactly,
// the objects a checkpoint refers to (key and size); the checkpoint layer
// records them instead of uploading them. Restoring is [OpenCheckpoint]
// on the downloaded local part with the same RemoteOptions.Store and
// Prefix: the database opens without reading a table and serves reads at
// once, fetching blocks on demand.
//
// Objects live at <Prefix>/<owner>/<locator>/<Pebble's object name>. The
// locator is RemoteOptions.Generation plus a random 64-bit suffix drawn
// at every open, and Pebble records it with each object in the catalog.
// Two databases that continue from one checkpoint (a fenced writer and
// its successor, or two restores) continue with the same file numbers
// and creator id, so Pebble's object names alone would collide; their
// locators do not, so neither can replace an object the other, or any
// checkpoint, refers to. A database writes only under its own locator
// (it refuses to create an object anywhere else) and reads older
// locators' objects where the catalog says they are.
//
// The checkpoint layer, not Pebble, owns the objects
// (blobstorage.Storage.UseRemote with [Store.CheckpointRemote]):
//
//   - Pebble deletes an obsolete object itself only if this open created
//     it; Pebble protects every object of a checkpoint taken by the same
//     open, so such an object is in no checkpoint. Objects of earlier
//     locators are never deleted here, even when the database drops them.
//   - Pebble's per-table reference markers (which let databases that
//     share an object know when the last one lets go) are virtual: none
//     is written, listed or deleted, which saves a PUT per new table and
//     a LIST and a DELETE per obsolete one. No two databases share an
//     object here.
//   - GC may delete an object only when no retained checkpoint, pinned
//     restore or savepoint refers to it, it is not under the prefix of a
//     writer that may still be live ([Store.RemotePrefixes]; inside the
//     writer, [Store.LiveRemoteObjects] says what its databases use), and
//     it is older than the grace period (an object is uploaded before
//     Pebble records it in the MANIFEST).
//
// A missing, truncated or corrupt object fails the read that needs it
// with an error wrapping [ErrRemoteObject] and naming the object's key
// (corruption is caught by Pebble's block checksums); it never yields
// wrong data, and the database stays usable for reads that do not need
// the object.
//
// Cold point reads cost one ranged read each on a table already open; a
// table not yet open adds the reads of its footer and index blocks (a
// restored database knows its tables' sizes from the MANIFEST and opens
// them without a Stat); [Store.Hydrate], run
// in the background after a restore, reads the whole state into the
// secondary cache (RemoteOptions.CacheSize per owner, preallocated on
// local disk), several key ranges at a time. Table statistics are not collected in remote mode:
// collecting them reads every table soon after open, and Pebble's size
// check there ends the process on a truncated object.
//
// # Errors
//
// Errors wrap [ErrInvalidOwner], [ErrClosed], [ErrUnsupportedFile] and
// [ErrRemoteObject] with %w; an existing destination wraps fs.ErrExist.
package state
