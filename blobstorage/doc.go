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
//	_latest, _latest-completed                         pointers {"id", "epoch"}, moved by CAS
//	_writer                                            writer epoch {"epoch", "writer", "since"}
//	_tidemark                                          the store's identity mark {"format", "created"}
//	pins/<id>/<nonce>                                  restore pins
//	savepoints/<label>                                 savepoints (checkpoint.SavepointPrefix)
//
// Private files carry the writer epoch so that a zombie reusing an id
// never overwrites the new writer's bytes; shared files are named by the
// checkpoint and epoch that first uploaded them, so a name is never
// recycled (no ABA). KeyClass names the part of the layout a key is in.
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
// # Store identity
//
// A prefix becomes a Tidemark store when a writer first takes the role
// there (Acquire writes _tidemark). Acquire and GC refuse, with
// ErrForeignStore and before writing anything, a prefix that holds other
// data and no mark: pointing a job or gc at a bucket root, or at a
// directory another program owns, must not fence, overwrite or delete
// anything there. A prefix holding only Tidemark's own keys (written
// before marks existed) is adopted and marked.
//
// # Files
//
// storage.go holds the type, its options and the loads; layout.go every
// key; fence.go the writer role; save.go, restore.go, gc.go, archive.go
// one operation each; worker.go and parts.go the workers of a job
// spanning hosts and the commit of their parts.
package blobstorage
