package dst

import (
	"flag"
	"fmt"
	"strings"
	"testing"

	"github.com/tidemark-io/tidemark/internal/simbug"
)

var bugSeeds = flag.Int("bug-seeds", 60, "how many seeds TestBugs tries per deliberate bug")

// TestBugs switches on each deliberate bug (internal/simbug) and runs
// seeds from 1 until one breaks an invariant: each must be caught, and
// the count is the table in docs/simulation.md.
func TestBugs(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the deliberate bugs are tried by make dst and the full test run")
	}
	var table []string
	for _, bug := range simbug.All {
		t.Run(string(bug), func(t *testing.T) {
			simbug.Active = bug
			defer func() { simbug.Active = "" }()
			for seed := uint64(1); seed <= uint64(*bugSeeds); seed++ {
				res := runSeed(t, seed, false)
				if len(res.Violations) > 0 {
					row := fmt.Sprintf("| %s | %d | %d | %s |", bug, seed, seed, firstLine(res.Violations[0]))
					table = append(table, row)
					t.Logf("caught after %d seeds (seed %d): %s", seed, seed, res.Violations[0])
					return
				}
			}
			t.Errorf("deliberate bug %s not caught in %d seeds", bug, *bugSeeds)
		})
	}
	t.Logf("| bug | seeds needed | first failing seed | invariant that broke |\n|---|---|---|---|\n%s", strings.Join(table, "\n"))
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return strings.ReplaceAll(s, "|", "\\|")
}
