package dst

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
)

// regressionSeeds reads testdata/regressions.txt: seeds that once failed.
func regressionSeeds(t *testing.T) []uint64 {
	t.Helper()
	f, err := os.Open("testdata/regressions.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var seeds []uint64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		n, err := strconv.ParseUint(strings.Fields(line)[0], 10, 64)
		if err != nil {
			t.Fatalf("testdata/regressions.txt: %q: %v", line, err)
		}
		seeds = append(seeds, n)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(seeds) == 0 {
		t.Fatal("testdata/regressions.txt lists no seed")
	}
	return seeds
}

// TestRegressions replays every seed that ever broke an invariant.
func TestRegressions(t *testing.T) {
	for _, seed := range regressionSeeds(t) {
		report(t, seed, runSeed(t, seed, false))
	}
}
