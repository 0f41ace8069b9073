package dst

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/tidemark-io/tidemark/integration/sim"
	"github.com/tidemark-io/tidemark/internal/simbug"
)

// TestSim runs a range of seeds (the smoke set by default; -seeds N for
// more, -seed S for one), checking every invariant after each.
func TestSim(t *testing.T) {
	seeds := []uint64{}
	switch {
	case *seedFlag != 0:
		seeds = append(seeds, *seedFlag)
	default:
		n := *seedsFlag
		if n == 0 {
			n = 8
		}
		for i := range n {
			seeds = append(seeds, *firstFlag+uint64(i))
		}
	}
	if *bugFlag != "" {
		simbug.Active = simbug.Bug(*bugFlag)
		if !slices.Contains(simbug.All, simbug.Active) {
			t.Fatalf("-bug=%s: no such deliberate bug (%v)", *bugFlag, simbug.All)
		}
		defer func() { simbug.Active = "" }()
	}
	var total sim.Stats
	for _, seed := range seeds {
		res := runSeed(t, seed, *traceFlag)
		total.Add(res.Stats)
		if *traceFlag {
			t.Logf("seed %d trace:\n%s", seed, strings.Join(res.Full, "\n"))
		}
		report(t, seed, res)
	}
	t.Logf("%d runs\n%s", len(seeds), total)
	fmt.Printf("DST-TOTAL runs=%d %s\n", len(seeds), total.Line())
}

// TestSimRuntime runs seeds with every writer on job.Run, the runtime
// (Pebble state, the BlobSink), instead of the Coordinator by hand.
func TestSimRuntime(t *testing.T) { runMode(t, modeRuntime, 2) }

// TestSimRemote runs seeds of the runtime mode with the state in remote
// mode (job.Config.RemoteState "all"): Pebble's SSTs in the store.
func TestSimRemote(t *testing.T) { runMode(t, modeRemote, 2) }

// TestSimWorkers runs seeds of a job spanning hosts: a coordinator
// (job.RunCoordinator, a standby taking over) and a worker per slot
// (job.RunWorker), reaching each other through the simulation's Group.
func TestSimWorkers(t *testing.T) { runMode(t, modeWorkers, 3) }

// runMode runs -seeds seeds of mode (smoke without the flag), or -seed.
func runMode(t *testing.T, mode string, smoke int) {
	n := *seedsFlag
	if n == 0 {
		n = smoke
	}
	seeds := []uint64{}
	if *seedFlag != 0 {
		seeds = append(seeds, *seedFlag)
	} else {
		for i := range n {
			seeds = append(seeds, *firstFlag+uint64(i))
		}
	}
	var total sim.Stats
	for _, seed := range seeds {
		res := runSeedMode(t, seed, mode, *traceFlag)
		total.Add(res.Stats)
		if *traceFlag {
			t.Logf("seed %d trace:\n%s", seed, strings.Join(res.Full, "\n"))
		}
		report(t, seed, res)
	}
	t.Logf("%d runs\n%s", len(seeds), total)
	fmt.Printf("DST-TOTAL runs=%d %s\n", len(seeds), total.Line())
}
