package s3store

import (
	"context"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/integration/miniotest"
)

func TestIdleStoreReleasesItsBuffers(t *testing.T) {
	s := newStore(t, miniotest.Shared(t), nil)
	// Long enough to outlast the requests that end a Put (Complete, the
	// upload record's DELETE) on a busy machine.
	s.bufs.idle = time.Second
	if err := s.Put(context.Background(), "k", stream(randomBytes(3*testPartSize, 20))); err != nil {
		t.Fatal(err)
	}
	if got := s.bufs.cached(); got == 0 {
		t.Fatal("no buffer cached right after an upload")
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.bufs.cached() > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if got := s.bufs.cached(); got != 0 {
		t.Errorf("%d buffers still cached %v after the last use", got, 10*time.Second)
	}
}

func TestBufCacheKeepsAtMostItsCapacity(t *testing.T) {
	c := newBufCache(1<<10, 2)
	bufs := []*[]byte{c.get(), c.get(), c.get()}
	for _, b := range bufs {
		c.put(b)
	}
	if got := c.cached(); got != 2 {
		t.Errorf("cached %d buffers, want the capacity 2", got)
	}
	for range 2 {
		c.get()
	}
	if got := c.allocs.Load(); got != 3 {
		t.Errorf("%d allocations, want 3 (the cached buffers reused)", got)
	}
}

func TestPartBudgetBlocksBeyondItsSlots(t *testing.T) {
	b := newPartBudget(newBufCache(1<<10, 2), 2)
	ctx := context.Background()
	first, _ := b.get(ctx)
	second, _ := b.get(ctx)
	b.drop(second)
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := b.get(short); err == nil {
		t.Fatal("a third buffer out of two slots (one dropped)")
	}
	b.put(first)
	if _, err := b.get(ctx); err != nil {
		t.Fatalf("no buffer after one was given back: %v", err)
	}
}

func TestBufCacheSweepAfterReleaseDoesNotPanic(t *testing.T) {
	// The idle timer fires while release holds the lock; its sweep then
	// finds the cache emptied and the timer gone.
	c := newBufCache(1<<10, 2)
	c.idle = 10 * time.Millisecond
	c.put(c.get())
	c.mu.Lock()
	time.Sleep(50 * time.Millisecond) // the timer fires; its sweep waits for c.mu
	c.dropAll()                       // what release does under the lock
	c.lastPut = time.Now()            // as after a put since the timer was armed: sweep re-arms
	c.mu.Unlock()
	time.Sleep(50 * time.Millisecond) // let the sweep run (a panic kills the test binary)
	if got := c.cached(); got != 0 {
		t.Fatalf("%d buffers cached after release, want 0", got)
	}
}
