package blobstoretest

import (
	"context"
	"crypto/sha256"
	"io"
	"iter"
	"sync"
	"sync/atomic"

	"github.com/tidemark-io/tidemark/blobstore"
)

// Call is one operation asked of an Interceptor.
type Call struct {
	// Op is the operation; GetWithInfo is OpGet.
	Op blobstore.Op
	// Key is the key, or the prefix for OpList.
	Key string
	// Seq numbers the calls of the Interceptor from 1, in arrival order.
	Seq int
	// Body is what the store will read for a put. Before may replace it.
	Body io.Reader
}

// IsWrite reports whether c is a Put, PutIfAbsent or PutIfMatch.
func (c *Call) IsWrite() bool {
	return c.Op == blobstore.OpPut || c.Op == blobstore.OpPutIfAbsent || c.Op == blobstore.OpPutIfMatch
}

// Hooks say what an Interceptor does around each call. Every hook is
// optional and may be called concurrently.
type Hooks struct {
	// Before runs ahead of the call and may block. An error fails the
	// call with it; the store underneath is not asked.
	Before func(ctx context.Context, c *Call) error
	// After sees the store's error (for OpList, the iteration's) and
	// returns the one the caller gets.
	After func(c *Call, err error) error
	// Read wraps the body of a get, as the caller reads it.
	Read func(c *Call, r io.Reader) io.Reader
}

// Interceptor is a Blobstore decorator for fault and counting tests. It
// runs its Hooks around every operation and counts calls and bytes.
//
// It is an InfoGetter, and Unwrap exposes the store underneath, so
// blobstore.As finds every other capability there. Calls made through
// those capabilities (DeleteIfMatch, AbortIncompleteUploads) bypass it.
type Interceptor struct {
	bs    blobstore.Blobstore
	hooks Hooks

	mu     sync.Mutex
	seq    int
	calls  []Call
	counts map[blobstore.Op]int

	up, down atomic.Int64
}

var (
	_ blobstore.Blobstore  = (*Interceptor)(nil)
	_ blobstore.InfoGetter = (*Interceptor)(nil)
	_ blobstore.Unwrapper  = (*Interceptor)(nil)
)

// Intercept returns bs decorated with h.
func Intercept(bs blobstore.Blobstore, h Hooks) *Interceptor {
	return &Interceptor{bs: bs, hooks: h, counts: map[blobstore.Op]int{}}
}

// Unwrap returns the store underneath.
func (i *Interceptor) Unwrap() blobstore.Blobstore { return i.bs }

// Count returns the calls so far of the given operations, or of all.
func (i *Interceptor) Count(ops ...blobstore.Op) int {
	i.mu.Lock()
	defer i.mu.Unlock()
	if len(ops) == 0 {
		return i.seq
	}
	n := 0
	for _, op := range ops {
		n += i.counts[op]
	}
	return n
}

// Calls returns the calls so far, in arrival order, without their bodies.
func (i *Interceptor) Calls() []Call {
	i.mu.Lock()
	defer i.mu.Unlock()
	return append([]Call(nil), i.calls...)
}

// Bytes returns the bytes the store read from puts (up) and the bytes
// callers read from gets (down).
func (i *Interceptor) Bytes() (up, down int64) { return i.up.Load(), i.down.Load() }

// begin records a call and runs Before.
func (i *Interceptor) begin(ctx context.Context, op blobstore.Op, key string, body io.Reader) (*Call, error) {
	i.mu.Lock()
	i.seq++
	i.counts[op]++
	c := &Call{Op: op, Key: key, Seq: i.seq}
	i.calls = append(i.calls, *c)
	i.mu.Unlock()
	c.Body = body
	if i.hooks.Before != nil {
		if err := i.hooks.Before(ctx, c); err != nil {
			return c, err
		}
	}
	if c.Body != nil {
		c.Body = countUp(c.Body, &i.up)
	}
	return c, nil
}

// end runs After on the call's error.
func (i *Interceptor) end(c *Call, err error) error {
	if i.hooks.After != nil {
		return i.hooks.After(c, err)
	}
	return err
}

// counting adds what it reads to n.
type counting struct {
	r io.Reader
	n *atomic.Int64
}

func (c *counting) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// countUp counts what the store reads from r, keeping r's digest (see
// blobstore.DigestReader) for a store that signs payloads with it.
func countUp(r io.Reader, n *atomic.Int64) io.Reader {
	c := &counting{r: r, n: n}
	if d, ok := r.(blobstore.DigestReader); ok {
		return digestCounting{c, d}
	}
	return c
}

// digestCounting is a counting reader over a DigestReader.
type digestCounting struct {
	*counting
	d blobstore.DigestReader
}

func (c digestCounting) SHA256() [sha256.Size]byte { return c.d.SHA256() }

// Put intercepts bs.Put.
func (i *Interceptor) Put(ctx context.Context, key string, r io.Reader) error {
	c, err := i.begin(ctx, blobstore.OpPut, key, r)
	if err == nil {
		err = i.bs.Put(ctx, key, c.Body)
	}
	return i.end(c, err)
}

// PutIfAbsent intercepts bs.PutIfAbsent.
func (i *Interceptor) PutIfAbsent(ctx context.Context, key string, r io.Reader) (etag string, err error) {
	c, err := i.begin(ctx, blobstore.OpPutIfAbsent, key, r)
	if err == nil {
		etag, err = i.bs.PutIfAbsent(ctx, key, c.Body)
	}
	return etag, i.end(c, err)
}

// PutIfMatch intercepts bs.PutIfMatch.
func (i *Interceptor) PutIfMatch(ctx context.Context, key, match string, r io.Reader) (etag string, err error) {
	c, err := i.begin(ctx, blobstore.OpPutIfMatch, key, r)
	if err == nil {
		etag, err = i.bs.PutIfMatch(ctx, key, match, c.Body)
	}
	return etag, i.end(c, err)
}

// body wraps a get's body with the Read hook and the byte count.
func (i *Interceptor) body(c *Call, rc io.ReadCloser) io.ReadCloser {
	var r io.Reader = rc
	if i.hooks.Read != nil {
		r = i.hooks.Read(c, r)
	}
	return struct {
		io.Reader
		io.Closer
	}{&counting{r: r, n: &i.down}, rc}
}

// open intercepts a get done by get.
func (i *Interceptor) open(ctx context.Context, op blobstore.Op, key string, get func() (io.ReadCloser, error)) (io.ReadCloser, error) {
	c, err := i.begin(ctx, op, key, nil)
	var rc io.ReadCloser
	if err == nil {
		rc, err = get()
	}
	if err = i.end(c, err); err != nil {
		if rc != nil {
			rc.Close()
		}
		return nil, err
	}
	return i.body(c, rc), nil
}

// Get intercepts bs.Get.
func (i *Interceptor) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	return i.open(ctx, blobstore.OpGet, key, func() (io.ReadCloser, error) { return i.bs.Get(ctx, key) })
}

// GetWithInfo is one OpGet call on a store that is an InfoGetter, and a
// Stat and a Get, both intercepted, on one that is not.
func (i *Interceptor) GetWithInfo(ctx context.Context, key string) (io.ReadCloser, blobstore.ObjectInfo, error) {
	g, ok := i.bs.(blobstore.InfoGetter)
	if !ok {
		return blobstore.GetWithInfo(ctx, struct{ blobstore.Blobstore }{i}, key)
	}
	var info blobstore.ObjectInfo
	rc, err := i.open(ctx, blobstore.OpGet, key, func() (rc io.ReadCloser, err error) {
		rc, info, err = g.GetWithInfo(ctx, key)
		return rc, err
	})
	return rc, info, err
}

// GetRange intercepts bs.GetRange.
func (i *Interceptor) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	return i.open(ctx, blobstore.OpGetRange, key, func() (io.ReadCloser, error) { return i.bs.GetRange(ctx, key, off, n) })
}

// Stat intercepts bs.Stat.
func (i *Interceptor) Stat(ctx context.Context, key string) (info blobstore.ObjectInfo, err error) {
	c, err := i.begin(ctx, blobstore.OpStat, key, nil)
	if err == nil {
		info, err = i.bs.Stat(ctx, key)
	}
	return info, i.end(c, err)
}

// Exists intercepts bs.Exists.
func (i *Interceptor) Exists(ctx context.Context, key string) (ok bool, err error) {
	c, err := i.begin(ctx, blobstore.OpExists, key, nil)
	if err == nil {
		ok, err = i.bs.Exists(ctx, key)
	}
	return ok, i.end(c, err)
}

// List intercepts bs.List: Before runs when the iteration starts, After
// when it ends.
func (i *Interceptor) List(ctx context.Context, prefix string) iter.Seq2[blobstore.ObjectInfo, error] {
	return func(yield func(blobstore.ObjectInfo, error) bool) {
		c, err := i.begin(ctx, blobstore.OpList, prefix, nil)
		if err == nil {
			for info, e := range i.bs.List(ctx, prefix) {
				if e != nil {
					err = e
					break
				}
				if !yield(info, nil) {
					i.end(c, nil)
					return
				}
			}
		}
		if err = i.end(c, err); err != nil {
			yield(blobstore.ObjectInfo{}, err)
		}
	}
}

// Delete intercepts bs.Delete.
func (i *Interceptor) Delete(ctx context.Context, key string) error {
	c, err := i.begin(ctx, blobstore.OpDelete, key, nil)
	if err == nil {
		err = i.bs.Delete(ctx, key)
	}
	return i.end(c, err)
}
