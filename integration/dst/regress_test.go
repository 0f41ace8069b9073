package dst

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
)

// regressionSeeds reads testdata/regressions.txt: seeds that once failed.
type regression struct {
	seed uint64
	mode string // modeClassic, modeRuntime, modeRemote or modeWorkers
}

func regressionSeeds(t *testing.T) []regression {
	t.Helper()
	f, err := os.Open("testdata/regressions.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var seeds []regression
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		n, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			t.Fatalf("testdata/regressions.txt: %q: %v", line, err)
		}
		r := regression{seed: n}
		// A mode, if the second word names one; else what the seed found.
		if len(f) > 1 && (f[1] == modeRuntime || f[1] == modeWorkers || f[1] == modeRemote) {
			r.mode = f[1]
		}
		seeds = append(seeds, r)
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
	for _, r := range regressionSeeds(t) {
		report(t, r.seed, runSeedMode(t, r.seed, r.mode, false))
	}
}
