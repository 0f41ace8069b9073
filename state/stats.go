package state

import (
	"bytes"
	"slices"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"golang.org/x/sync/errgroup"
)

// OwnerStats describes an owner's tables, from their properties: it
// reads no data block. Writes still in the WAL are not counted.
type OwnerStats struct {
	Tables int
	// Bytes is the size of the tables.
	Bytes int64
	// Keys is the number of entries in the tables that are not deletions:
	// the live keys when no key has two versions (after a compaction),
	// an estimate above them otherwise.
	Keys uint64
	// KeyBytes and ValueBytes are the tables' raw key and value sizes.
	KeyBytes, ValueBytes uint64
	// Sampled is the number of tables whose properties were read. When
	// it is below Tables, Keys, KeyBytes and ValueBytes are scaled up
	// from the sample by size.
	Sampled int
}

// statsGroups is how many tables' properties Stats reads at once, and
// statsSample how many it reads at most: a remote table's properties
// cost ranged reads, so reading a thousand took seconds.
const statsGroups = 16

var statsSample = 64 // a variable for tests

// Stats returns the owner's OwnerStats. Tables and Bytes are exact; the
// key counts and sizes come from the properties of at most statsSample
// tables spread over the key space, scaled by size.
func (o *Owner) Stats() (OwnerStats, error) {
	if err := o.s.acquire(); err != nil {
		return OwnerStats{}, o.errorf("stats", nil, err)
	}
	defer o.s.release()
	levels, err := o.db.SSTables()
	if err != nil {
		return OwnerStats{}, o.errorf("stats", nil, err)
	}
	var st OwnerStats
	var tables []pebble.SSTableInfo
	for _, level := range levels {
		for _, t := range level {
			tables = append(tables, t)
			st.Tables++
			st.Bytes += int64(t.Size)
		}
	}
	slices.SortFunc(tables, func(a, b pebble.SSTableInfo) int { return bytes.Compare(a.Smallest.UserKey, b.Smallest.UserKey) })
	sample := tables
	if len(tables) > statsSample {
		sample = make([]pebble.SSTableInfo, statsSample)
		for i := range sample {
			sample[i] = tables[i*len(tables)/statsSample]
		}
	}
	// Each sampled table's key range is read with its properties; a
	// table of another level overlapping it comes too and joins the
	// sample, counted once.
	var mu sync.Mutex
	seen := map[uint64]bool{}
	var sampledBytes uint64
	var g errgroup.Group
	g.SetLimit(statsGroups)
	for _, t := range sample {
		start, end := t.Smallest.UserKey, append(bytes.Clone(t.Largest.UserKey), 0)
		g.Go(func() error {
			found, err := o.db.SSTables(pebble.WithProperties(), pebble.WithKeyRangeFilter(start, end))
			if err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			for _, level := range found {
				for _, t := range level {
					if seen[uint64(t.FileNum)] || t.Properties == nil {
						continue
					}
					seen[uint64(t.FileNum)] = true
					p := t.Properties
					st.Sampled++
					sampledBytes += t.Size
					st.Keys += p.NumEntries - min(p.NumEntries, p.NumDeletions)
					st.KeyBytes += p.RawKeySize
					st.ValueBytes += p.RawValueSize
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return OwnerStats{}, o.errorf("stats", nil, err)
	}
	if st.Sampled < st.Tables && sampledBytes > 0 {
		scale := func(v uint64) uint64 { return uint64(float64(v) * float64(st.Bytes) / float64(sampledBytes)) }
		st.Keys, st.KeyBytes, st.ValueBytes = scale(st.Keys), scale(st.KeyBytes), scale(st.ValueBytes)
	}
	return st, nil
}
