// Package dst runs Tidemark's deterministic simulation (integration/sim):
// writers, zombies and an operator on a faulted, simulated store, one
// seed per run, every failure replayable from its seed.
package dst

import (
	"flag"
	"fmt"
	"strings"
	"testing"
	"testing/cryptotest"
	"testing/synctest"
	"time"

	"github.com/tidemark-io/tidemark/integration/sim"
	"github.com/tidemark-io/tidemark/internal/simbug"
)

var (
	seedFlag  = flag.Uint64("seed", 0, "run only this seed (TestSim)")
	seedsFlag = flag.Int("seeds", 0, "how many seeds TestSim runs (0: the smoke set)")
	firstFlag = flag.Uint64("first-seed", 1, "the first seed of TestSim's range")
	traceFlag = flag.Bool("simtrace", false, "print the whole trace of each run")
	bugFlag   = flag.String("bug", "", "switch on a deliberate bug (internal/simbug) for TestSim")
)

// runSeed runs one seed in its own bubble and returns what it found.
func runSeed(t *testing.T, seed uint64, keepTrace bool) sim.Result {
	t.Helper()
	return runSeedWith(t, seed, false, keepTrace)
}

// The modes of a run: classic writers, job.Run, or a coordinator with
// workers.
const (
	modeClassic = ""
	modeRuntime = "runtime"
	modeWorkers = "workers"
	modeRemote  = "remote" // the runtime mode, the state in remote mode
)

// runSeedWith runs one seed, its writers on job.Run if runtime.
func runSeedWith(t *testing.T, seed uint64, runtime, keepTrace bool) sim.Result {
	t.Helper()
	mode := modeClassic
	if runtime {
		mode = modeRuntime
	}
	return runSeedMode(t, seed, mode, keepTrace)
}

// runSeedMode runs one seed in mode.
func runSeedMode(t *testing.T, seed uint64, mode string, keepTrace bool) sim.Result {
	t.Helper()
	var res sim.Result
	dir := t.TempDir()
	// Pin nonces come from crypto/rand: seed it too.
	cryptotest.SetGlobalRandom(t, seed)
	synctest.Test(t, func(t *testing.T) {
		res = sim.Run(sim.Config{Seed: seed, Rates: sim.DefaultRates, Operator: true, Dir: dir, KeepTrace: keepTrace, Runtime: mode == modeRuntime || mode == modeRemote, Workers: mode == modeWorkers, RemoteState: remoteState(mode)})
	})
	if ok, checked := res.History.Check(20 * time.Second); !ok {
		res.Violations = append(res.Violations, fmt.Sprintf("the history of pointer reads and writes (%d calls) is not linearizable", res.History.Len()))
	} else if !checked {
		t.Logf("seed %d: the linearizability check timed out (%d calls): not decided", seed, res.History.Len())
	}
	return res
}

func remoteState(mode string) string {
	if mode == modeRemote {
		return "all"
	}
	return ""
}

func testName(res sim.Result) string {
	if res.Remote {
		return "TestSimRemote"
	}
	if res.Workers {
		return "TestSimWorkers"
	}
	if res.Runtime {
		return "TestSimRuntime"
	}
	return "TestSim"
}

func bugArg() string {
	if simbug.Active == "" {
		return ""
	}
	return " -bug=" + string(simbug.Active)
}

// report fails t with the replay command and the trace around the failure.
func report(t *testing.T, seed uint64, res sim.Result) {
	t.Helper()
	if len(res.Violations) == 0 {
		return
	}
	tail := res.Trace
	if len(tail) > 80 {
		tail = tail[len(tail)-80:]
	}
	t.Errorf("seed %d broke %d invariant(s):\n  %s\n\nreplay: go test ./integration/dst -run '%s$' -seed=%d%s -v\n\nlast steps of the trace:\n%s",
		seed, len(res.Violations), strings.Join(res.Violations, "\n  "), testName(res), seed, bugArg(), strings.Join(tail, "\n"))
}
