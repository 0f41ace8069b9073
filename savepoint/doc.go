// Package savepoint stores savepoints in a Blobstore incrementally: each
// file's content once, named by its SHA-256, in the store's savepoint
// area, and per savepoint one manifest object that names them. A new
// savepoint uploads only the content the area lacks; a copy to another
// store sends only what that store lacks; deleting one removes only the
// content no other savepoint references. Package checkpoint's
// CreateSavepoint, RestoreSavepoint, CopySavepoint and DeleteSavepoint
// are built on it. See docs/savepoints.md.
//
// # Layout and formats
//
// The keys are made in layout.go and nowhere else:
//
//	savepoints/<label>                       the savepoint's object
//	savepoint-data/sha256/<hex>              content, by SHA-256
//	savepoint-data/locks/<kind>-<nonce>      locks of operations in progress
//
// A savepoint's object is a manifest object (FormatManifest: a header
// line, then the manifest of package archive) or, for savepoints written
// before this package, a whole archive (FormatArchive). Readers tell them
// apart by the first bytes, so both are read everywhere, and
// Savepoint.WriteArchive turns either into the portable archive.
//
// # Invariants
//
//   - A manifest object is published last, after every content object it
//     names is in the store; without Options.Replace with PutIfAbsent.
//   - No content object's bytes disagree with its name: every upload is
//     checked against the digest as it streams and fails otherwise.
//   - A delete never removes content a manifest references, nor content a
//     create in progress found present: see the locks in lock.go.
//   - Nothing here trusts what it reads: manifests are bounded and
//     checked as archive manifests are (archive.Limits).
//
// Checkpoint GC never deletes under savepoints/ or savepoint-data/.
package savepoint
