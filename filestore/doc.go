// Package filestore implements [blobstore.Blobstore] on a directory tree:
// the key "a/b/c" is the file dir/a/b/c. It is the store for local
// development and for jobs that share a volume, and it passes the
// conformance suite in blobstore/blobstoretest.
//
// # URLs
//
// Importing the package registers the "file" scheme with [blobstore.Open]:
//
//	file:///var/lib/tidemark        absolute directory
//	file://localhost/var/lib/tidemark
//	file:relative/dir               relative to the working directory
//
// Any other host is an error. Query parameters set [Options]:
// must_exist=true (a missing directory is [ErrStoreNotFound] rather than
// an empty store, for read-only tools) and lock_timeout (a Go duration,
// default 30s, or none); any other parameter is an error.
//
// # Writes and durability
//
// Every write goes to a temporary file in the key's directory, which is
// then fsynced, renamed over the key, and the directory fsynced:
//
//  1. The data is fsynced before the rename, so a crash can never expose a
//     name whose data is not on disk (no empty or torn object after a
//     crash).
//  2. The rename is atomic, so readers see the old object or the new one,
//     never a mix. An open reader keeps reading the version it opened.
//  3. The directory is fsynced after the rename, so the new name survives
//     a crash once Put has returned. Directories a write creates are
//     fsynced into their parents before anything is created inside them.
//
// On any error, including the context being cancelled while the reader is
// being drained, the temporary file is removed and nothing is visible.
// Memory is one 1 MiB copy buffer per concurrent write, whatever the size
// of the object.
//
// # Conditional writes across processes
//
// PutIfAbsent and PutIfMatch must be atomic against writers in other
// processes sharing the directory (two job processes on one volume). The
// body is written to the temporary file first, outside any lock; then the
// writer takes flock(LOCK_EX) on the key's parent directory, checks the
// condition, renames, fsyncs the directory and unlocks. Put and Delete take
// the same lock around their rename or unlink, so a compare-and-swap can
// never be undone by a write that slipped in between its check and its
// rename. flock needs a local filesystem (or one that implements it, as
// NFSv4 does); it does not work on every network filesystem.
//
// The lock is held for milliseconds by a healthy writer, but a process
// stopped while holding it (SIGSTOP, docker pause, a cgroup freezer, a
// debugger) holds it for as long as it stays stopped. So a writer waits
// for a lock by polling a non-blocking flock: the wait ends when its
// context is done, or after Options.LockTimeout (default 30 s) with
// [ErrLocked], naming the locked directory. Reads take no lock and are
// never blocked. Safety does not depend on the timeout: a writer that
// gives up changes nothing.
//
// # ETags
//
// An ETag is derived from the file's inode number, size, modification time
// and status-change time (nanoseconds), so Stat and List compute it without
// reading data. Every write creates a new inode (temporary file + rename)
// and sets its modification time explicitly to the commit time with
// nanosecond resolution, so even an inode number recycled within one clock
// tick of the kernel's coarse timestamps yields a different ETag. Changing
// a file in place outside filestore changes its status-change time and
// therefore its ETag; so does chmod, which merely makes a conditional write
// fail spuriously.
//
// # Keys on a filesystem
//
// Keys obey the rules of [blobstore.ValidateKey]; every method checks them
// before any I/O, so no key can name a path outside the root. The store
// never follows a symbolic link out of the root, in any path component
// (it resolves every path through [os.Root]). A symbolic link placed
// inside the tree is not an object: List neither reports nor follows it,
// and Get and Stat follow it only if it resolves inside the root.
//
// A filesystem cannot hold both "a/b" and "a/b/c": "a/b" would have to be
// a file and a directory. Writing either when the other exists fails with
// [ErrKeyConflict]. (S3 allows it; Tidemark's own layouts never need it.)
//
// A key is stored as the file of the same relative path: its segments
// are at most 255 bytes (blobstore.MaxSegmentLen), within every common
// filesystem's NAME_MAX. Temporary files end in the byte 0x7f, which no
// key contains, so they can never be mistaken for keys.
//
// # Platforms
//
// Linux and macOS (flock, fsync of directories, and the stat fields used
// for ETags).
package filestore
