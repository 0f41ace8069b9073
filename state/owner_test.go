package state_test

import "testing"

// A scan of every key (an empty, non-nil prefix) yields every pair, from
// tables too; Scan gives Pebble no lower bound then (a CI run under -race
// panicked in Pebble's invariant checks on an empty non-nil bound, in
// tidemark inspect; this test did not reproduce that panic).
func TestScanWithAnEmptyPrefixRepeatedly(t *testing.T) {
	o := owner(t, openStore(t, t.TempDir()), "o")
	if err := o.Set([]byte("a"), []byte("1")); err != nil {
		t.Fatal(err)
	}
	if err := o.Flush(); err != nil { // a table to seek in, not only the memtable
		t.Fatal(err)
	}
	for range 20 {
		n := 0
		for _, err := range o.Scan([]byte{}) {
			if err != nil {
				t.Fatal(err)
			}
			n++
		}
		if n != 1 {
			t.Fatalf("scan of every key: %d pairs, want 1", n)
		}
	}
}
