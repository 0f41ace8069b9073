package state

import (
	"github.com/cockroachdb/pebble/v2"
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

// Stats returns the owner's OwnerStats.
func (o *Owner) Stats() (OwnerStats, error) {
	if err := o.s.acquire(); err != nil {
		return OwnerStats{}, o.errorf("stats", nil, err)
	}
	defer o.s.release()
	levels, err := o.db.SSTables(pebble.WithProperties())
	if err != nil {
		return OwnerStats{}, o.errorf("stats", nil, err)
	}
	var st OwnerStats
	for _, level := range levels {
		for _, t := range level {
			st.Tables++
			st.Bytes += int64(t.Size)
			if p := t.Properties; p != nil {
				st.Keys += p.NumEntries - min(p.NumEntries, p.NumDeletions)
				st.KeyBytes += p.RawKeySize
				st.ValueBytes += p.RawValueSize
			}
		}
	}
	return st, nil
}
