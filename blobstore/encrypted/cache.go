package encrypted

import "sync"

// maxCachedHeaders bounds the header cache: an AES-GCM key schedule is
// well under a KiB, so the cache stays under a few MiB.
const maxCachedHeaders = 4096

// headerCache holds the opened headers of objects read lately, so that a
// range read past chunk 0 (Pebble reading a block of a remote table)
// costs one request, not two. An entry goes stale when another writer
// replaces the object; the chunk then fails authentication, and the
// reader drops the entry and reads the header again.
type headerCache struct {
	mu sync.Mutex
	m  map[string]*objectKey
}

func (c *headerCache) get(key string) *objectKey {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[key]
}

func (c *headerCache) put(key string, ok *objectKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCachedHeaders {
		c.m = make(map[string]*objectKey) // crude, but bounded
	}
	c.m[key] = ok
}

func (c *headerCache) drop(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, key)
}
