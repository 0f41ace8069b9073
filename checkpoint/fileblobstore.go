package checkpoint

import "github.com/tidemark-io/tidemark/filestore"

// FileBlobstore is a Blobstore backed by a directory tree: each key maps
// to a file under the root. Pointed at a volume mounted into every job, a
// savepoint written by one job is visible to another — the same namespace
// semantics S3 gives across hosts. It is the filestore package's Store
// (atomic, durable writes; conditional writes safe across processes).
type FileBlobstore = filestore.Store

// NewFileBlobstore roots a blobstore at dir (created on first write). It
// fails only for an empty dir or one whose absolute path cannot be found,
// which the reference's signature had no way to report.
func NewFileBlobstore(dir string) (*FileBlobstore, error) {
	return filestore.New(dir)
}
