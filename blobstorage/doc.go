// Package blobstorage is the checkpoint.Storage on any blobstore.Blobstore:
// checkpoints that outlive the node that took them, with writer fencing,
// incremental uploads of immutable files, verified restore on an empty
// node, restore pins and garbage collection.
//
// # Layout
//
// Keys are relative to the Blobstore the Storage was given (prefix it with
// blobstore.WithPrefix when several jobs share a bucket):
//
//	checkpoints/<id>/checkpoint.json                  the record (Record as JSON)
//	checkpoints/<id>/private/e<epoch>/<owner>/<path>  mutable files (MANIFEST, OPTIONS, WAL…)
//	shared/<owner>/<id>-e<epoch>/<path>               immutable files (SSTs), uploaded once
//	checkpoints/<id>/parts/e<epoch>/<owner>/<worker>/part.json      a worker's part (Part as JSON)
//	checkpoints/<id>/parts/e<epoch>/<owner>/<worker>/files/<path>   its mutable files
//	shared/<owner>/<id>-e<epoch>-<worker>/<path>      immutable files a worker uploaded
//	remote/<owner>/e<epoch>-<nonce>/<name>            remote mode: SSTs Pebble wrote itself (see below)
//	_latest, _latest-completed                         pointers {"id", "epoch"}, moved by CAS
//	_writer                                            writer epoch {"epoch", "writer", "since"}
//	_tidemark                                          the store's identity mark {"format", "created"}
//	_replication                                       a replica's status, written by its Replicator
//	pins/<id>/<nonce>                                  restore pins
//	savepoints/<label>                                 savepoints (checkpoint.SavepointPrefix)
//	savepoint-data/…                                   their content and locks (package savepoint's layout)
//	_tidemark_probe/<nonce>/…                          s3store's probe, for a moment before the first write
//
// Private files carry the writer epoch so that a zombie reusing an id
// never overwrites the new writer's bytes; shared files are named by the
// checkpoint and epoch that first uploaded them, so a name is never
// recycled (no ABA). layout.go parses every key under this grammar; KeyClass
// names the part of the layout a key is in, for metrics only.
//
// # Jobs spanning hosts
//
// When a job's owners run in several processes, each process is a
// Worker: Worker.SavePart uploads the state of its owners for checkpoint
// id and writes one Part record per owner, create-if-absent, at a key
// named by (id, epoch, owner, worker id). The job's writer (a Storage
// after Acquire) is the single commit point: after Assign(owner → worker
// id), Save reads exactly one part per assigned owner (a GET at the key
// the assignment names, no LIST), and writes the record — the parts'
// files merged into Record.Files, the assignment in Record.Workers —
// only when every one is there; then the pointers move as for any Save.
// A part written under another epoch, or by a worker the assignment no
// longer names (a replaced worker, which NewWorkerID gives a new id), is
// not at that key and is never committed (ErrPartMissing); a zombie
// worker writes only under its own id, so it never overwrites its
// successor's objects. A worker reuses the immutable files it uploaded or
// restored, as a Storage does — across a change of epoch only those a
// committed checkpoint names, so that nothing uploaded for a fenced
// writer is carried forward; Save checks that the files a part reuses
// from earlier checkpoints still exist (a HEAD for each one no record
// this writer wrote under its epoch names yet) before a record names
// them, since the writer's GC does not tell the workers what it deleted.
//
// Worker.Restore downloads only the owners a worker runs, verified and
// pinned as Storage.Restore; the checkpoint may have been saved with any
// assignment, so a job resumes with more or fewer workers (rescale) and
// the next Save records the new one. Parts live under checkpoints/<id>/
// and shared/<owner>/<id>-…, so GC's rules apply unchanged: the parts of
// a checkpoint that never committed are files without a record, removed
// after Grace; the files a kept record references are kept.
//
// # Remote mode
//
// With state in remote mode (state.Options.Remote with Store the
// Storage's Blobstore, Prefix RemotePrefix and Generation
// RemoteGeneration(epoch), then UseRemote), Pebble writes SSTs to
// remote/<owner>/<locator>/ itself, the locator being the generation of
// the writer's epoch plus a random suffix drawn at every open. A Save
// uploads only the local files and records, per owner, the remote
// objects the checkpoint references (Record.Remote): ownership passes to
// the checkpoint, nothing is copied. Restore downloads only the files;
// the state is then opened with the same RemoteOptions (the new writer's
// generation) and reads the objects where they are. Verify checks that
// each exists with its recorded size. Workers run remote mode the same
// way (Worker.UseRemote, with the writer's generation): a part hands its
// owners' objects to the checkpoint (Part.Remote), so a worker gaining an
// owner on a rescale opens it in place instead of downloading it.
//
// A fenced writer's new objects are under its own epoch's generation and
// in no checkpoint of its successor, which restored an earlier one; its
// Save fails with checkpoint.ErrFenced before recording any.
//
// GC owns the remote objects: it deletes one only if no retained
// checkpoint (kept by retention, a pointer or a pin) references it, it is
// older than Grace (Pebble uploads an object before it records it), and
// it is not the live writer's. The generation of the epoch in _writer is
// left alone by any GC but that writer's (tidemark gc, for one); the
// writer's own GC (UseRemote) deletes the objects under its open
// databases' prefixes that they no longer use, and keeps the rest of its
// generation. Objects of other epochs (earlier, fenced writers) go once
// unreferenced and past Grace. Keys under remote/ without such a locator
// are left alone. A savepoint of such a checkpoint carries the objects
// (paths under archive.RemotePrefix, their keys), and extracting it into
// a Storage puts them back under the same keys (SaveImported); a
// checkpoint.FileStorage target is refused before anything is written.
//
// # Garbage collection
//
// GC needs no writer role: an operator runs it beside the live job
// (docs/gc.md has the races). The boundary is what the writer publishes by
// compare-and-swap anyway: _writer's epoch and _latest. GC reads the
// clock, then _writer and the pointers, then lists; it keeps what the
// pointers, retention and pins keep, and, run by anyone but the writer,
// every checkpoint newer than _latest saved under the live epoch and the
// tables uploaded for it. A Save reuses only tables its last record
// references, so nothing it reuses is ever unprotected. GC deletes records
// before files, each record only with the ETag it read
// (blobstore.ConditionalDeleter where enforced), and lists the pins again
// before the files: Restore pins before it reads a record.
//
// # Store identity
//
// A prefix is a Tidemark store when it holds the _tidemark mark, which the
// first writer's Acquire writes. One written before marks existed is
// adopted only when every key parses under the layout grammar and a
// record decodes or a savepoint's manifest reads. Acquire, GC and
// CheckStore refuse anything else with ErrForeignStore before writing or
// deleting: a bucket root or a user's folders named checkpoints/ and
// shared/ are never touched. CheckStore tells, writing nothing, a store
// from an empty prefix (ErrNoStore): tools that operate on an existing
// store call it first, so that a mistyped prefix is an error, not a new
// store.
//
// # Job identity
//
// Every record carries its job's id (checkpoint.JobToSave): Save stamps
// the job of the latest checkpoint on a record without one, and refuses
// a record of another job unless it starts one (a savepoint restored as
// a new job). The id changes only with the pointer that names the
// latest record.
//
// # Replication
//
// A Replicator copies every completed checkpoint from one store to a
// replica of which it is the writer: each checkpoint's objects first,
// verified against the record, then the record, then the pointers; it
// keeps the replica's status in _replication and measures the recovery
// point. docs/replication.md has the protocol, failover and figures.
//
// # Files
//
// storage.go holds the type, its options and the loads; layout.go every
// key; fence.go the writer role; save.go, restore.go, gc.go, archive.go
// one operation each; worker.go and parts.go the workers of a job
// spanning hosts and the commit of their parts; remote.go the remote mode;
// replicate.go replication.
package blobstorage
