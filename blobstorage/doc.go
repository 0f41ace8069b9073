// Package blobstorage is the checkpoint.Storage on any blobstore.Blobstore:
// checkpoints that outlive the node that took them, with writer fencing,
// incremental uploads of immutable files, verified restore on an empty
// node, restore pins and garbage collection.
//
// # Layout
//
// Keys are relative to the Blobstore the Storage was given (prefix it with
// blobstore.WithPrefix when several jobs share a bucket): records under
// checkpoints/<id>/, immutable files under shared/<owner>/, the pointers
// _latest and _latest-completed, the writer epoch in _writer, the store's
// mark in _tidemark, pins under pins/. Private files carry the writer
// epoch, so a zombie reusing an id never overwrites the new writer's
// bytes; a shared file's name is never recycled. layout.go makes and
// parses every key; KeyClass names a key's part, for metrics only.
//
// # Jobs spanning hosts
//
// Each process of a job is a Worker: Worker.SavePart uploads its owners'
// state and writes one Part per owner. The writer (a Storage after
// Acquire and Assign) is the one commit point: Save reads one part per
// assigned owner and writes the record only when all are there, else it
// fails with ErrPartMissing. Worker.Restore downloads only a worker's
// owners, so a job resumes with more or fewer workers.
//
// # Remote mode
//
// With UseRemote, Pebble writes SSTs to remote/<owner>/… itself and a
// Save records the objects a checkpoint references instead of uploading
// them. Restore downloads only the local files. GC deletes a remote
// object only when no retained checkpoint uses it, it is past Grace and
// it is not the live writer's.
//
// # Garbage collection and identity
//
// GC needs no writer role: it runs beside the live job (docs/gc.md).
// It deletes records before files, each with the ETag it read. Acquire,
// GC and CheckStore refuse a prefix that is not a Tidemark store
// (ErrForeignStore); CheckStore tells an empty prefix (ErrNoStore). Every
// record carries its job's id, and Save refuses another job's record.
// A Replicator copies completed checkpoints to a replica
// (docs/replication.md).
//
// The full layout, the rules of parts, remote objects, GC and identity
// are in docs/architecture.md ("The blobstorage package").
//
// # Files
//
// storage.go holds the type, its options and the loads; layout.go every
// key; fence.go the writer role; save.go, restore.go, gc.go, archive.go
// one operation each; worker.go and parts.go the workers of a job
// spanning hosts and the commit of their parts; remote.go the remote mode;
// replicate.go replication.
package blobstorage
