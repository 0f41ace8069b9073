package state

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/objstorage"
	dto "github.com/prometheus/client_model/go"
	"golang.org/x/sync/errgroup"
)

// In remote mode Hydrate copies the remote objects into the secondary
// cache with large ranged reads, decoding no block. Iterating the key
// space instead read 1 MiB ahead per iterator, one request in flight each,
// read a quarter more bytes than the objects hold, and decompressed every
// block on the way: 2-5 times slower on loopback MinIO.
const (
	// hydrateChunk is the size of one ranged read: nearly every table
	// takes one, as in a download of the objects.
	hydrateChunk = 4 << 20
	// hydrateReads is the number of ranged reads in flight across owners:
	// a download's concurrency, within the SDK's 10 idle connections per
	// host (more reads in flight dial a new connection for each).
	hydrateReads = 8
	// hydrateBacklog is the number of chunks an owner's cache may have
	// queued for its disk writers before Hydrate waits to read more.
	hydrateBacklog = 4
)

// hydrateObject is a remote object of an owner, read whole by Hydrate.
type hydrateObject struct {
	o        *Owner
	meta     objstorage.ObjectMetadata
	size     int64
	level    int    // the highest level with a table backed by it
	smallest []byte // that table's smallest key
}

// hydrateObjects reads the remote objects of owners into their secondary
// caches, hydrateReads chunks in flight. Memory stays bounded: Hydrate
// holds only chunks in flight and those queued for the cache's writers,
// at most hydrateBacklog per owner before it waits. Owners are read one
// after another, so about one owner's backlog is held at a time.
func (s *Store) hydrateObjects(ctx context.Context, owners []*Owner) error {
	if err := s.acquire(); err != nil {
		return fmt.Errorf("state: hydrate: %w", err)
	}
	defer s.release()
	var objs []hydrateObject
	for _, o := range owners {
		list, err := o.hydrateList()
		if err != nil {
			return o.errorf("hydrate", nil, err)
		}
		objs = append(objs, list...)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(hydrateReads)
	var open []objstorage.Readable
	defer func() {
		for _, r := range open {
			_ = r.Close() // a remote reader holds nothing to release
		}
	}()
	for _, obj := range objs {
		if gctx.Err() != nil {
			break
		}
		provider := obj.o.db.ObjProvider()
		r, err := provider.OpenForReading(gctx, obj.meta.FileType, obj.meta.DiskFileNum, objstorage.OpenOptions{})
		if err != nil {
			if obj.o.gone(obj.meta) {
				continue
			}
			return errors.Join(obj.o.errorf("hydrate", nil, err), g.Wait())
		}
		open = append(open, r)
		size := min(obj.size, r.Size())
		for off := int64(0); off < size; off += hydrateChunk {
			if err := obj.o.awaitBacklog(gctx, hydrateBacklog); err != nil {
				break
			}
			g.Go(func() error {
				// ReadAt through the cache: a miss reads the chunk and
				// queues it for the cache's writers.
				buf := make([]byte, min(hydrateChunk, size-off))
				if err := r.ReadAt(gctx, buf, off); err != nil && !obj.o.gone(obj.meta) {
					return obj.o.errorf("hydrate", nil, err)
				}
				return nil
			})
		}
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("state: hydrate: %w", err)
	}
	for _, o := range owners {
		if err := o.awaitCacheWrites(ctx); err != nil {
			return o.errorf("hydrate", nil, err)
		}
	}
	return nil
}

// gone reports whether the owner's database no longer has the object: a
// compaction removed it while Hydrate read it, which is no error.
func (o *Owner) gone(meta objstorage.ObjectMetadata) bool {
	_, err := o.db.ObjProvider().Lookup(meta.FileType, meta.DiskFileNum)
	return err != nil
}

// hydrateList returns the owner's remote objects Hydrate reads: upper
// levels first, in key order within a level, as many as fill 7/8 of the
// secondary cache (the rest for blocks read meanwhile, and for shards
// filled unevenly). Reading more would evict what was read first.
func (o *Owner) hydrateList() ([]hydrateObject, error) {
	levels, err := o.db.SSTables()
	if err != nil {
		return nil, err
	}
	first := make(map[uint64]hydrateObject)
	for level, tables := range levels {
		for _, t := range tables {
			if t.BackingType != pebble.BackingTypeShared {
				continue
			}
			n := uint64(t.BackingSSTNum)
			obj, seen := first[n]
			if !seen {
				obj = hydrateObject{o: o, level: level, smallest: t.Smallest.UserKey, size: int64(t.Size)}
			}
			if t.Virtual {
				obj.size = -1 // its size is its share of the object: Stat the object
			}
			first[n] = obj
		}
	}
	provider := o.db.ObjProvider()
	var out []hydrateObject
	for _, meta := range provider.List() {
		obj, ok := first[uint64(meta.DiskFileNum)]
		if !ok || !meta.IsRemote() {
			continue
		}
		obj.meta = meta
		if obj.size < 0 {
			if obj.size, err = provider.Size(meta); err != nil {
				return nil, err
			}
		}
		out = append(out, obj)
	}
	slices.SortFunc(out, func(a, b hydrateObject) int {
		if c := cmp.Compare(a.level, b.level); c != 0 {
			return c
		}
		return bytes.Compare(a.smallest, b.smallest)
	})
	budget := o.s.opts.Remote.cacheSize() / 8 * 7
	for i, obj := range out {
		if budget -= obj.size; budget < 0 {
			return out[:i], nil
		}
	}
	return out, nil
}

// awaitBacklog waits until the secondary cache has at most n writes
// queued or under way.
func (o *Owner) awaitBacklog(ctx context.Context, n uint64) error {
	for {
		m := o.db.Metrics().SecondaryCacheMetrics
		put, queued := sampleCount(m.PutLatency), sampleCount(m.QueuePutLatency)
		if queued <= put+n {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

// awaitCacheWrites waits until the secondary cache has written as many
// blocks as were queued when it was called. Its writers work in the
// background, and a read before they finish would go to the store.
func (o *Owner) awaitCacheWrites(ctx context.Context) error {
	m := o.db.Metrics().SecondaryCacheMetrics
	queued := sampleCount(m.QueuePutLatency)
	for sampleCount(o.db.Metrics().SecondaryCacheMetrics.PutLatency) < queued {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}

// sampleCount returns the number of observations of a histogram.
func sampleCount(h interface{ Write(*dto.Metric) error }) uint64 {
	var m dto.Metric
	if h == nil || h.Write(&m) != nil {
		return 0
	}
	return m.GetHistogram().GetSampleCount()
}
