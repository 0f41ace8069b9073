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
// An owner's checkpoint is then its own directory. The owners share one
// block cache and one file cache. Owner ids are one path segment of
// [A-Za-z0-9._-] ([ValidateOwnerID]); anything else fails with
// [ErrInvalidOwner] before touching the disk.
//
// # Reads, writes and checkpoints
//
// [Owner.Get], [Owner.Set], [Owner.Delete], [Owner.Apply] (an atomic
// batch) and [Owner.Scan] are safe for concurrent use. Writes are not
// fsynced by default: the checkpoint is the durability point
// ([Options.SyncWrites] changes this).
//
// [Store.Checkpoint] takes a native Pebble checkpoint of every owner:
// SSTs hard-linked, the rest copied, all fsynced. It flushes each
// memtable first, so what changed sits in new, immutable SSTs. For a
// consistent cut across owners, checkpoint at the barrier.
// [OpenCheckpoint] opens a copy of a checkpoint directory, which stays
// immutable. [Classify] says which files are [Immutable] (uploaded once,
// shared) and which [Private] to one checkpoint.
//
// # Remote mode (instant restore)
//
// With [Options.Remote], Pebble creates SSTs in an object store through
// state/remotestore and reads them block by block through a local cache.
// A checkpoint then holds only the local part, and
// [Store.RemoteObjects] lists the objects it refers to. A restore opens
// at once and fetches blocks on demand; [Store.Hydrate] warms the cache.
// Each open writes under its own locator, so two databases continuing
// from one checkpoint never replace each other's objects. The checkpoint
// layer, not Pebble, owns the objects ([Store.CheckpointRemote]).
//
// Why one database per owner, why shared files are not named by Pebble's
// file names, how objects are named, owned and deleted, and what a cold
// read costs: docs/state.md.
//
// # Errors
//
// Errors wrap [ErrInvalidOwner], [ErrClosed], [ErrUnsupportedFile] and
// [ErrRemoteObject] with %w; an existing destination wraps fs.ErrExist.
// A missing or corrupt remote object fails only the reads that need it.
package state
