package dst

import (
	"testing"
)

// TestReplay runs one seed twice and compares the whole traces, line by
// line: a seed is a replay, bit for bit, or a failure found by the
// simulation could not be debugged.
func TestReplay(t *testing.T) {
	for _, tc := range []struct {
		seed uint64
		mode string
	}{{3, modeClassic}, {11, modeClassic}, {5, modeWorkers}} {
		seed := tc.seed
		a := runSeedMode(t, seed, tc.mode, true)
		b := runSeedMode(t, seed, tc.mode, true)
		if len(a.Full) == 0 {
			t.Fatalf("seed %d: empty trace", seed)
		}
		for i := range min(len(a.Full), len(b.Full)) {
			if a.Full[i] != b.Full[i] {
				t.Fatalf("seed %d: the traces differ at line %d:\n first: %s\nsecond: %s", seed, i+1, a.Full[i], b.Full[i])
			}
		}
		if len(a.Full) != len(b.Full) || a.Hash != b.Hash {
			t.Fatalf("seed %d: traces of %d and %d lines (hashes %x, %x)", seed, len(a.Full), len(b.Full), a.Hash, b.Hash)
		}
		t.Logf("seed %d (mode %q): %d lines, %d store calls, identical twice (hash %x)", seed, tc.mode, len(a.Full), a.Stats.Calls, a.Hash)
	}
}
