package state

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"
)

// TestHydrateRangesCoverTheKeySpaceOnce: the ranges Hydrate reads in
// parallel are contiguous, unbounded at both ends, and together hold
// every key exactly once. (Keys written in order: 8 tables that overlap
// nothing.)
func TestHydrateRangesCoverTheKeySpaceOnce(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "live"), Options{MemTableSize: 256 << 10, CacheSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	o, err := s.Owner("op")
	if err != nil {
		t.Fatal(err)
	}
	const keys = 4000
	for i := range keys {
		if err := o.Set(fmt.Appendf(nil, "k%06d", i), []byte("v")); err != nil {
			t.Fatal(err)
		}
		if i%500 == 499 {
			if err := o.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	ranges, err := o.hydrateRanges()
	if err != nil {
		t.Fatal(err)
	}
	if len(ranges) < 2 {
		t.Fatalf("%d ranges over 8 tables, want several", len(ranges))
	}
	if ranges[0][0] != nil || ranges[len(ranges)-1][1] != nil {
		t.Fatalf("ranges %q: want unbounded ends", ranges)
	}
	total := 0
	for i, r := range ranges {
		if i > 0 && !bytes.Equal(r[0], ranges[i-1][1]) {
			t.Fatalf("ranges %q are not contiguous", ranges)
		}
		it, err := o.db.NewIter(nil)
		if err != nil {
			t.Fatal(err)
		}
		for ok := it.First(); ok; ok = it.Next() {
			k := it.Key()
			if (r[0] == nil || bytes.Compare(k, r[0]) >= 0) && (r[1] == nil || bytes.Compare(k, r[1]) < 0) {
				total++
			}
		}
		it.Close()
	}
	if total != keys {
		t.Fatalf("the ranges hold %d keys, want %d", total, keys)
	}
	if err := s.Hydrate(t.Context()); err != nil {
		t.Fatal(err)
	}
}
