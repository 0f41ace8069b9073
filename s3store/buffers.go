package s3store

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Part buffers. An upload holds at most Concurrency+1 buffers of PartSize
// bytes and GetParallel at most Concurrency; that bound is structural, not
// a consequence of how the goroutines happen to be scheduled: each
// operation takes its buffers through a partBudget with that many slots,
// and cannot take another while all slots are held.
//
// Buffers that operations give back are kept in the Store's bufCache for
// the next operation. It used to be a sync.Pool, which broke the bound in
// practice: its free lists are per P, so a buffer a worker put back on
// one P was not found by the reader on another, which allocated a new
// one, and the pool is emptied at every GC. A 1 GiB upload with 16 MiB
// parts and concurrency 4 allocated about eight parts' worth and grew the
// process by 106-131 MiB against the 80 MiB promised, the garbage buffers
// waiting for the collector.

// bufIdleRelease is how long the buffers an operation gave back stay
// cached without any use before the cache drops them, so that an idle
// Store does not pin PartSize × (Concurrency+1) bytes forever. Compared
// to a transfer, allocating them again is cheap (zeroing 80 MiB takes
// tens of milliseconds); the cache is there for back-to-back operations,
// whose old buffers would otherwise sit as garbage next to the new ones
// until the next GC.
const bufIdleRelease = 10 * time.Second

// bufCache keeps up to max part buffers of size bytes between operations.
type bufCache struct {
	size int64
	max  int
	idle time.Duration // bufIdleRelease; tests shorten it

	mu      sync.Mutex
	free    []*[]byte
	lastPut time.Time
	timer   *time.Timer // armed while free is not empty

	allocs atomic.Int64 // buffers allocated so far, for tests
}

func newBufCache(size int64, max int) *bufCache {
	return &bufCache{size: size, max: max, idle: bufIdleRelease}
}

// get returns a cached buffer, or a new one.
func (c *bufCache) get() *[]byte {
	c.mu.Lock()
	if n := len(c.free); n > 0 {
		b := c.free[n-1]
		c.free[n-1] = nil
		c.free = c.free[:n-1]
		c.mu.Unlock()
		return b
	}
	c.mu.Unlock()
	c.allocs.Add(1)
	b := make([]byte, c.size)
	return &b
}

// put caches b for reuse, or drops it if the cache is full. Only a buffer
// that nothing else references may be put: see partBudget.drop.
func (c *bufCache) put(b *[]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.free) >= c.max {
		return
	}
	c.free = append(c.free, b)
	c.lastPut = time.Now()
	if c.timer == nil {
		c.timer = time.AfterFunc(c.idle, c.sweep)
	}
}

// sweep drops the cached buffers if none was given back for c.idle, and
// otherwise looks again when that much time will have passed.
func (c *bufCache) sweep() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.timer == nil {
		// release emptied the cache (and disarmed the timer) while this
		// run of the timer waited for the lock: nothing is left to drop.
		return
	}
	if since := time.Since(c.lastPut); since < c.idle {
		c.timer.Reset(c.idle - since)
		return
	}
	c.dropAll()
}

// release drops the cached buffers now (benchmarks start from an empty
// cache this way).
func (c *bufCache) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropAll()
}

// dropAll empties the cache and stops its timer; c.mu is held.
func (c *bufCache) dropAll() {
	clear(c.free)
	c.free = nil
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
}

// cached returns the number of buffers in the cache.
func (c *bufCache) cached() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.free)
}

// partBudget hands out the part buffers of one operation, at most n at a
// time.
type partBudget struct {
	c     *bufCache
	slots chan struct{} // one token per buffer held
}

func newPartBudget(c *bufCache, n int) *partBudget {
	return &partBudget{c: c, slots: make(chan struct{}, n)}
}

// get waits for a free slot and returns a buffer for it. It fails only
// when ctx is done, with its cause.
func (b *partBudget) get(ctx context.Context) (*[]byte, error) {
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	select {
	case b.slots <- struct{}{}:
		return b.c.get(), nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// put gives back a buffer that is no longer referenced, and its slot.
func (b *partBudget) put(buf *[]byte) {
	b.c.put(buf)
	<-b.slots
}

// drop abandons a buffer that a failed request may still be reading: the
// HTTP transport can go on reading a request body in another goroutine
// after the request failed, so the buffer must be neither reused nor
// written. Its slot stays taken, so the operation (which is failing) can
// not replace it with a new buffer while the old one may still be in use.
func (b *partBudget) drop(*[]byte) {}
