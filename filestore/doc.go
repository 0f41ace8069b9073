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
// must_exist=true (a missing directory is [ErrStoreNotFound]) and
// lock_timeout (a Go duration, default 30s, or none); any other
// parameter is an error.
//
// # Writes, locks and ETags
//
// Every write goes to a temporary file, which is fsynced, renamed over
// the key, and the directory fsynced: a crash never exposes a torn
// object, readers see the old object or the new one, and a name survives
// a crash once Put has returned. On any error nothing is visible.
//
// PutIfAbsent and PutIfMatch are atomic against other processes sharing
// the directory: the writer takes flock on the key's parent directory
// around its check and rename, and Put and Delete take the same lock.
// flock needs a local filesystem (or NFSv4). A writer waits for a lock at
// most Options.LockTimeout, then fails with [ErrLocked], changing nothing.
//
// An ETag is derived from the file's inode, size and times, so Stat and
// List compute it without reading data; every write makes a new inode.
//
// # Keys on a filesystem
//
// Keys obey [blobstore.ValidateKey], checked before any I/O, and every
// path is resolved through [os.Root]: no key and no symbolic link reaches
// outside the root. A filesystem cannot hold both "a/b" and "a/b/c":
// writing one when the other exists fails with [ErrKeyConflict].
//
// The order of the fsyncs, the lock's polling, the ETag's fields and the
// rules for symbolic links and temporary files are in docs/s3.md ("The
// filestore package"). It runs on Linux and macOS.
package filestore
