package demo

import (
	"context"
	"io"
	"iter"
	"sync/atomic"
	"time"

	"github.com/tidemark-io/tidemark/blobstore"
)

// Meter is a Blobstore decorator that counts what is written through it,
// for the progress lines ("bytes uploaded"). It forwards every call
// unchanged.
type Meter struct {
	bs      blobstore.Blobstore
	bytes   atomic.Int64
	objects atomic.Int64
}

var _ blobstore.Blobstore = (*Meter)(nil)

// NewMeter wraps bs.
func NewMeter(bs blobstore.Blobstore) *Meter { return &Meter{bs: bs} }

// Unwrap returns the wrapped store, so that CheckConditionalWrites finds
// its Probe through the Meter.
func (m *Meter) Unwrap() blobstore.Blobstore { return m.bs }

// Uploaded returns the bytes and objects written by successful puts so far.
func (m *Meter) Uploaded() (bytes, objects int64) { return m.bytes.Load(), m.objects.Load() }

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (m *Meter) done(c *countingReader, err error) {
	if err == nil {
		m.bytes.Add(c.n)
		m.objects.Add(1)
	}
}

// Put forwards to the wrapped store and counts the bytes on success.
func (m *Meter) Put(ctx context.Context, key string, r io.Reader) error {
	c := &countingReader{r: r}
	err := m.bs.Put(ctx, key, c)
	m.done(c, err)
	return err
}

// PutIfAbsent forwards to the wrapped store and counts the bytes on success.
func (m *Meter) PutIfAbsent(ctx context.Context, key string, r io.Reader) (string, error) {
	c := &countingReader{r: r}
	etag, err := m.bs.PutIfAbsent(ctx, key, c)
	m.done(c, err)
	return etag, err
}

// PutIfMatch forwards to the wrapped store and counts the bytes on success.
func (m *Meter) PutIfMatch(ctx context.Context, key, etag string, r io.Reader) (string, error) {
	c := &countingReader{r: r}
	etag, err := m.bs.PutIfMatch(ctx, key, etag, c)
	m.done(c, err)
	return etag, err
}

// Get forwards to the wrapped store.
func (m *Meter) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	return m.bs.Get(ctx, key)
}

// GetRange forwards to the wrapped store.
func (m *Meter) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	return m.bs.GetRange(ctx, key, off, n)
}

// Stat forwards to the wrapped store.
func (m *Meter) Stat(ctx context.Context, key string) (blobstore.ObjectInfo, error) {
	return m.bs.Stat(ctx, key)
}

// Exists forwards to the wrapped store.
func (m *Meter) Exists(ctx context.Context, key string) (bool, error) {
	return m.bs.Exists(ctx, key)
}

// List forwards to the wrapped store.
func (m *Meter) List(ctx context.Context, prefix string) iter.Seq2[blobstore.ObjectInfo, error] {
	return m.bs.List(ctx, prefix)
}

// Delete forwards to the wrapped store.
func (m *Meter) Delete(ctx context.Context, key string) error { return m.bs.Delete(ctx, key) }

// incompleteUploadAborter is implemented by stores with multipart uploads
// (s3store); BlobStorage's GC looks for it.
type incompleteUploadAborter interface {
	AbortIncompleteUploads(ctx context.Context, prefix string, olderThan time.Duration) (int, error)
}

// AbortIncompleteUploads forwards to the wrapped store when it has
// multipart uploads to sweep, so that wrapping a store in a Meter does not
// hide them from garbage collection. Otherwise it does nothing.
func (m *Meter) AbortIncompleteUploads(ctx context.Context, prefix string, olderThan time.Duration) (int, error) {
	if a, ok := m.bs.(incompleteUploadAborter); ok {
		return a.AbortIncompleteUploads(ctx, prefix, olderThan)
	}
	return 0, nil
}
