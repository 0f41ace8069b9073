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
// one operation each.
package blobstorage
