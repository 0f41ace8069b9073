package state

import (
	"fmt"
	"path/filepath"
	"testing"
)

// Stats of an owner with more tables than it samples reads the
// properties of some of them only and scales the key counts by size.
func TestStatsSamplesManyTables(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "live"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	o, err := s.Owner("op")
	if err != nil {
		t.Fatal(err)
	}
	const runs, perRun = 12, 500
	for r := range runs {
		for i := range perRun {
			if err := o.Set(fmt.Appendf(nil, "k-%02d-%04d", r, i), make([]byte, 100)); err != nil {
				t.Fatal(err)
			}
		}
		if err := o.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	exact, err := o.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if exact.Keys != runs*perRun || exact.Sampled != exact.Tables {
		t.Fatalf("Stats: %+v, want %d keys from every table", exact, runs*perRun)
	}
	if exact.Tables < 4 {
		t.Fatalf("Stats: %d tables, the test needs at least 4", exact.Tables)
	}
	defer func(n int) { statsSample = n }(statsSample)
	statsSample = 2
	est, err := o.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if est.Sampled >= est.Tables || est.Tables != exact.Tables || est.Bytes != exact.Bytes {
		t.Fatalf("sampled Stats: %+v, want fewer than %d tables read, the same tables and bytes", est, exact.Tables)
	}
	if lo, hi := exact.Keys*7/10, exact.Keys*13/10; est.Keys < lo || est.Keys > hi {
		t.Errorf("sampled Stats: %d keys, want within 30%% of %d", est.Keys, exact.Keys)
	}
}
