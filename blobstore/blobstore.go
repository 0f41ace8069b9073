// Package blobstore defines the object-store abstraction every part of
// Tidemark stands on, the rules for its keys, its errors, a URL opener
// with scheme registration, and decorators.
//
// # The contract
//
// A [Blobstore] maps keys to immutable byte objects. Every implementation
// (the in-memory store in blobstore/memstore, the filesystem store in
// filestore, the S3 store in s3store) passes the conformance suite in
// blobstore/blobstoretest, which is this contract in code:
//
//   - Put reads r to EOF and makes the object visible atomically when it
//     is complete. On error or context cancellation nothing becomes
//     visible and nothing is left behind. Memory is bounded whatever the
//     size of r.
//   - PutIfAbsent and PutIfMatch are conditional create and
//     compare-and-swap. When the condition does not hold they fail with
//     [ErrPreconditionFailed]; of N racing writers exactly one wins.
//   - Get and GetRange stream; a missing key is [ErrNotFound].
//   - List yields keys with a plain string prefix in lexicographic (byte)
//     order, any number of them, paged underneath.
//   - Delete is idempotent.
//
// # Keys
//
// Keys are '/'-separated, 1–1024 bytes of valid UTF-8, with no leading
// '/', no empty, "." or ".." segment and no control characters. Every
// implementation rejects other keys with [ErrInvalidKey] before doing any
// I/O; this is what keeps a crafted label or archive path from escaping a
// filestore root or another job's prefix. See [ValidateKey].
//
// # URLs
//
// Implementations register a URL scheme, the way database/sql drivers
// register, and [Open] picks one:
//
//	import _ "github.com/tidemark-io/tidemark/filestore" // file://
//	import _ "github.com/tidemark-io/tidemark/s3store"   // s3://
//
//	bs, err := blobstore.Open(ctx, "file:///var/lib/tidemark")
//	bs, err := blobstore.Open(ctx, "s3://bucket/prefix?region=eu-west-1")
//
// # Errors
//
// Errors wrap the sentinels [ErrNotFound], [ErrPreconditionFailed] and
// [ErrInvalidKey] with %w, so errors.Is works across implementations and
// decorators.
package blobstore

import (
	"context"
	"errors"
	"io"
	"iter"
	"time"
)

// Sentinel errors. Implementations wrap them with the operation and key,
// for example fmt.Errorf("filestore: get %q: %w", key, ErrNotFound).
var (
	// ErrNotFound is returned when a key does not exist.
	ErrNotFound = errors.New("blobstore: not found")
	// ErrPreconditionFailed is returned by PutIfAbsent when the key
	// exists and by PutIfMatch when the stored ETag differs from (or there
	// is no object to match) the one given.
	ErrPreconditionFailed = errors.New("blobstore: precondition failed")
	// ErrInvalidKey is returned for a key or prefix that breaks the key
	// rules (see ValidateKey). Nothing is read or written.
	ErrInvalidKey = errors.New("blobstore: invalid key")
)

// ObjectInfo describes a stored object.
type ObjectInfo struct {
	// Key is the object's key (relative to the store, or to the prefix of
	// a prefixed store).
	Key string
	// Size is the object's length in bytes.
	Size int64
	// ETag is an opaque version tag: it changes whenever the content
	// changes and is what PutIfMatch compares against.
	ETag string
	// ModTime is when the object was last written.
	ModTime time.Time
}

// Ref names an object and its length: what a checkpoint record
// references of state kept in the store (blobstorage.RemoteRef).
type Ref struct {
	// Key is the object's key.
	Key string `json:"key"`
	// Size is the object's length in bytes.
	Size int64 `json:"size"`
}

// Blobstore is the object-store abstraction: a flat namespace of keys
// holding immutable objects, with atomic puts and conditional writes.
// All methods are safe for concurrent use.
type Blobstore interface {
	// Put stores the contents of r under key, overwriting any existing
	// object. It reads r to EOF; the object becomes visible atomically
	// when complete, and on any error nothing is visible or left behind.
	Put(ctx context.Context, key string, r io.Reader) error

	// PutIfAbsent stores r under key only if key does not exist, and
	// returns the new object's ETag. It fails with ErrPreconditionFailed
	// if the key exists.
	PutIfAbsent(ctx context.Context, key string, r io.Reader) (etag string, err error)

	// PutIfMatch replaces the object at key only if its current ETag is
	// etag, and returns the new ETag. It fails with ErrPreconditionFailed
	// if the object is missing or its ETag differs.
	PutIfMatch(ctx context.Context, key, etag string, r io.Reader) (newETag string, err error)

	// Get opens the object at key for reading. The caller closes it.
	// A missing key is ErrNotFound.
	Get(ctx context.Context, key string) (io.ReadCloser, error)

	// GetRange opens length bytes of the object at key starting at
	// offset. A negative length reads to the end. A range that extends
	// past the end is cut at the end; one that starts at or past the end
	// reads nothing. A missing key is ErrNotFound.
	GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error)

	// Stat returns the object's size, ETag and modification time.
	// A missing key is ErrNotFound.
	Stat(ctx context.Context, key string) (ObjectInfo, error)

	// Exists reports whether an object is stored at key.
	Exists(ctx context.Context, key string) (bool, error)

	// List yields every object whose key starts with prefix (a plain
	// string prefix, as S3 matches it: "a/b" matches "a/b/c" and "a/bc")
	// in lexicographic byte order. An empty prefix lists everything. An
	// error ends the sequence.
	List(ctx context.Context, prefix string) iter.Seq2[ObjectInfo, error]

	// Delete removes the object at key. Deleting a missing key succeeds.
	Delete(ctx context.Context, key string) error
}
