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
}

// statsGroups is how many key ranges Stats reads table properties in at
// once: a remote table's properties cost a ranged read each, so reading
// them one after another took seconds for a thousand tables.
const statsGroups = 16

// Stats returns the owner's OwnerStats.
func (o *Owner) Stats() (OwnerStats, error) {
	if err := o.s.acquire(); err != nil {
		return OwnerStats{}, o.errorf("stats", nil, err)
	}
	defer o.s.release()
	levels, err := o.db.SSTables()
	if err != nil {
		return OwnerStats{}, o.errorf("stats", nil, err)
	}
	var tables []pebble.SSTableInfo
	for _, level := range levels {
		tables = append(tables, level...)
	}
	slices.SortFunc(tables, func(a, b pebble.SSTableInfo) int { return bytes.Compare(a.Smallest.UserKey, b.Smallest.UserKey) })
	// Each group of tables, by smallest key, is one key range whose
	// tables' properties are read by one SSTables call; a table that
	// overlaps two ranges is read twice and counted once.
	var mu sync.Mutex
	seen := map[uint64]bool{}
	var st OwnerStats
	var g errgroup.Group
	per := max(1, (len(tables)+statsGroups-1)/statsGroups)
	for lo := 0; lo < len(tables); lo += per {
		group := tables[lo:min(lo+per, len(tables))]
		start, end := group[0].Smallest.UserKey, []byte(nil)
		for _, t := range group {
			if end == nil || bytes.Compare(t.Largest.UserKey, end) >= 0 {
				end = append(bytes.Clone(t.Largest.UserKey), 0)
			}
		}
		g.Go(func() error {
			found, err := o.db.SSTables(pebble.WithProperties(), pebble.WithKeyRangeFilter(start, end))
			if err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			for _, level := range found {
				for _, t := range level {
					if seen[uint64(t.FileNum)] {
						continue
					}
					seen[uint64(t.FileNum)] = true
					st.Tables++
					st.Bytes += int64(t.Size)
					if p := t.Properties; p != nil {
						st.Keys += p.NumEntries - min(p.NumEntries, p.NumDeletions)
						st.KeyBytes += p.RawKeySize
						st.ValueBytes += p.RawValueSize
					}
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return OwnerStats{}, o.errorf("stats", nil, err)
	}
	return st, nil
}
