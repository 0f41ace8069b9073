package state

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"golang.org/x/sync/errgroup"
)

// hydrateParts is the number of key ranges of an owner hydrateKeys reads
// at once, and hydrateConcurrency the number of ranges in flight across
// owners.
const (
	hydrateParts       = 4
	hydrateConcurrency = 8
)

// Hydrate brings the state of every owner close, so that reads after it
// send no request to the object store. It is meant to run in the
// background after a restore (go st.Hydrate(ctx)) while reads are
// already served; it stops at the first error or when ctx is done.
//
// In remote mode it copies the remote objects into the secondary cache
// with 4 MiB ranged reads, 8 in flight across owners, decoding nothing
// (see hydrate_remote.go). It reads no more of an owner's objects than
// 7/8 of RemoteOptions.CacheSize, upper levels first: beyond that the
// cache would evict what it read first. With no secondary cache, and in
// local mode, it reads every key once, which only warms the block cache.
func (s *Store) Hydrate(ctx context.Context) error {
	s.mu.Lock()
	ids := slices.Sorted(maps.Keys(s.owners))
	s.mu.Unlock()
	owners := make([]*Owner, 0, len(ids))
	for _, id := range ids {
		o, err := s.Owner(id)
		if err != nil {
			return err
		}
		owners = append(owners, o)
	}
	if s.opts.Remote.enabled() && s.opts.Remote.cacheSize() > 0 {
		return s.hydrateObjects(ctx, owners)
	}
	return s.hydrateKeys(ctx, owners)
}

// hydrateKeys reads each owner's key space as up to four ranges split at
// table boundaries, several ranges at a time across owners.
func (s *Store) hydrateKeys(ctx context.Context, owners []*Owner) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(hydrateConcurrency)
	for _, o := range owners {
		ranges, err := o.hydrateRanges()
		if err != nil {
			return errors.Join(err, g.Wait())
		}
		for _, r := range ranges {
			g.Go(func() error { return o.hydrate(gctx, r[0], r[1]) })
		}
	}
	return g.Wait()
}

// hydrateRanges splits the owner's key space into up to hydrateParts
// ranges [lo, hi) (nil: unbounded) at the smallest keys of its tables.
func (o *Owner) hydrateRanges() ([][2][]byte, error) {
	if err := o.s.acquire(); err != nil {
		return nil, o.errorf("hydrate", nil, err)
	}
	defer o.s.release()
	levels, err := o.db.SSTables()
	if err != nil {
		return nil, o.errorf("hydrate", nil, err)
	}
	var starts [][]byte
	for _, level := range levels {
		for _, t := range level {
			starts = append(starts, t.Smallest.UserKey)
		}
	}
	slices.SortFunc(starts, bytes.Compare)
	starts = slices.CompactFunc(starts, bytes.Equal)
	var bounds [][]byte
	for i := 1; i < hydrateParts; i++ {
		if b := starts[len(starts)*i/hydrateParts:]; len(b) > 0 && len(starts) >= hydrateParts {
			bounds = append(bounds, slices.Clone(b[0]))
		}
	}
	bounds = slices.CompactFunc(bounds, bytes.Equal)
	ranges := make([][2][]byte, 0, len(bounds)+1)
	var lo []byte
	for _, b := range bounds {
		ranges = append(ranges, [2][]byte{lo, b})
		lo = b
	}
	return append(ranges, [2][]byte{lo, nil}), nil
}

// hydrate reads the owner's keys in [lo, hi).
func (o *Owner) hydrate(ctx context.Context, lo, hi []byte) error {
	if err := o.s.acquire(); err != nil {
		return o.errorf("hydrate", nil, err)
	}
	defer o.s.release()
	if len(lo) == 0 {
		lo = nil // see Scan: an empty non-nil bound panics under -race
	}
	it, err := o.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return o.errorf("hydrate", nil, err)
	}
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		if _, err := it.ValueAndErr(); err != nil {
			return errors.Join(o.errorf("hydrate", nil, err), it.Close())
		}
		if n++; n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return errors.Join(o.errorf("hydrate", nil, err), it.Close())
			}
		}
	}
	if err := it.Close(); err != nil {
		return o.errorf("hydrate", nil, err)
	}
	return nil
}
