package blobstorage

import (
	"context"
	"io"
	"iter"
	"sync/atomic"
	"time"

	"github.com/tidemark-io/tidemark/blobstore"
)

// Observer receives what a Storage does, for metrics (package metrics
// implements it with Prometheus). Its methods are called synchronously,
// from the operation that ends, and must be quick.
type Observer interface {
	Saved(SaveStats)
	Restored(RestoreStats)
	Collected(GCStats)
	Fenced(epoch uint64)
}

// PartObserver is an Observer that also hears of every Worker.SavePart
// (package metrics' CheckpointMetrics is one). A worker's restores reach
// any Observer as Restored; its parts reach only a PartObserver.
type PartObserver interface {
	Observer
	SavedPart(PartStats)
}

// SaveStats describes one Save, or an UpdateStatus (the second step of
// the two-phase protocol, which rewrites the record and moves the
// pointers: no files).
type SaveStats struct {
	ID        string
	Completed bool
	Duration  time.Duration
	// UploadedFiles and UploadedBytes are the state files this Save
	// uploaded; ReusedFiles and ReusedBytes those it referenced from
	// earlier checkpoints instead.
	UploadedFiles int
	UploadedBytes int64
	ReusedFiles   int
	ReusedBytes   int64
	// RemoteObjects and RemoteBytes are the objects of state in remote
	// mode the checkpoint references (handed over, not uploaded; see
	// UseRemote).
	RemoteObjects int
	RemoteBytes   int64
	// Requests is the number of object store requests the Save made.
	Requests int
	Err      error
}

// RestoreStats describes one Restore.
type RestoreStats struct {
	ID       string
	Duration time.Duration
	// Files and Bytes are what was downloaded and verified (none when the
	// state directory was already there).
	Files int
	Bytes int64
	Err   error
}

// GCStats describes one GC run that deleted (dry runs are not reported).
type GCStats struct {
	Deleted        int
	DeletedBytes   int64
	AbortedUploads int
	ExpiredPins    int
	Duration       time.Duration
	Err            error
}

// nopObserver is the Observer of a Storage without Options.Observer.
type nopObserver struct{}

func (nopObserver) Saved(SaveStats)       {}
func (nopObserver) Restored(RestoreStats) {}
func (nopObserver) Collected(GCStats)     {}
func (nopObserver) Fenced(uint64)         {}

// requestCounter counts the requests made through it, for SaveStats.
type requestCounter struct {
	blobstore.Blobstore
	n atomic.Int64
}

var (
	_ blobstore.Unwrapper  = (*requestCounter)(nil)
	_ blobstore.InfoGetter = (*requestCounter)(nil)
)

func (c *requestCounter) Unwrap() blobstore.Blobstore { return c.Blobstore }

func (c *requestCounter) Put(ctx context.Context, key string, r io.Reader) error {
	c.n.Add(1)
	return c.Blobstore.Put(ctx, key, r)
}

func (c *requestCounter) PutIfAbsent(ctx context.Context, key string, r io.Reader) (string, error) {
	c.n.Add(1)
	return c.Blobstore.PutIfAbsent(ctx, key, r)
}

func (c *requestCounter) PutIfMatch(ctx context.Context, key, etag string, r io.Reader) (string, error) {
	c.n.Add(1)
	return c.Blobstore.PutIfMatch(ctx, key, etag, r)
}

func (c *requestCounter) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	c.n.Add(1)
	return c.Blobstore.Get(ctx, key)
}

// GetWithInfo counts one request, or two where the store underneath
// needs a Stat before the Get.
func (c *requestCounter) GetWithInfo(ctx context.Context, key string) (io.ReadCloser, blobstore.ObjectInfo, error) {
	if _, ok := c.Blobstore.(blobstore.InfoGetter); ok {
		c.n.Add(1)
	} else {
		c.n.Add(2)
	}
	return blobstore.GetWithInfo(ctx, c.Blobstore, key)
}

func (c *requestCounter) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	c.n.Add(1)
	return c.Blobstore.GetRange(ctx, key, off, n)
}

func (c *requestCounter) Stat(ctx context.Context, key string) (blobstore.ObjectInfo, error) {
	c.n.Add(1)
	return c.Blobstore.Stat(ctx, key)
}

func (c *requestCounter) Exists(ctx context.Context, key string) (bool, error) {
	c.n.Add(1)
	return c.Blobstore.Exists(ctx, key)
}

func (c *requestCounter) List(ctx context.Context, prefix string) iter.Seq2[blobstore.ObjectInfo, error] {
	c.n.Add(1) // a page at least
	return c.Blobstore.List(ctx, prefix)
}

func (c *requestCounter) Delete(ctx context.Context, key string) error {
	c.n.Add(1)
	return c.Blobstore.Delete(ctx, key)
}
