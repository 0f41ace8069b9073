package integration

import (
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/state"
)

// buildBenchState fills every owner of st (whose directory is live) with
// keys 0..keysPerOwner-1 of writeKeys (value seed 1, valueSize
// incompressible bytes), flushes, compacts it to the bottom of the LSM,
// and waits until Pebble is quiet. It
// returns how long that took. The benchmarks of checkpoints and of
// instant restore build their state with it.
//
// The keys are written in key order, not in index order: Pebble's
// flushes are then tables that overlap nothing, and one manual compaction
// (Owner.Compact) rewrites them once into the lowest level, where a
// long-running job's state sits. Written in index order, which is spread
// over the whole key space, a bulk load is compacted several times over:
// minutes per GiB on two cores.
func buildBenchState(tb testing.TB, st *state.Store, live string, ids []string, keysPerOwner uint64, valueSize int) time.Duration {
	tb.Helper()
	start := time.Now()
	for _, id := range ids {
		o, err := st.Owner(id)
		if err != nil {
			tb.Fatal(err)
		}
		// Index order → key order. A key is the hex of a uint64, so
		// sorting the numbers sorts the keys.
		type entry struct{ key, i uint64 }
		order := make([]entry, keysPerOwner)
		for i := range keysPerOwner {
			k, err := strconv.ParseUint(string(stateKey(id, i)), 16, 64)
			if err != nil {
				tb.Fatal(err)
			}
			order[i] = entry{k, i}
		}
		slices.SortFunc(order, func(a, b entry) int {
			switch {
			case a.key < b.key:
				return -1
			case a.key > b.key:
				return 1
			}
			return 0
		})
		for lo := 0; lo < len(order); lo += 1000 {
			hi := min(lo+1000, len(order))
			err := o.Apply(func(b *state.Batch) error {
				for _, e := range order[lo:hi] {
					if err := b.Set(stateKey(id, e.i), stateValue(id, 1, e.i, valueSize)); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				tb.Fatal(err)
			}
		}
		if err := o.Flush(); err != nil {
			tb.Fatal(err)
		}
		if err := o.Compact(tb.Context()); err != nil {
			tb.Fatal(err)
		}
	}
	waitStateQuiet(tb, st, live)
	return time.Since(start)
}

// overwriteBenchState overwrites keysPerOwner/100 keys of every owner,
// picked by a generator seeded (seed, 42), with values of valueSeed, and
// returns the bytes written (keys and values). overwrittenKeys replays
// the same picks.
func overwriteBenchState(tb testing.TB, st *state.Store, ids []string, keysPerOwner uint64, valueSize int, seed, valueSeed uint64) int64 {
	tb.Helper()
	rng := rand.New(rand.NewPCG(seed, 42))
	var written int64
	for _, id := range ids {
		o, err := st.Owner(id)
		if err != nil {
			tb.Fatal(err)
		}
		err = o.Apply(func(batch *state.Batch) error {
			for range keysPerOwner / 100 {
				k := rng.Uint64N(keysPerOwner)
				key, value := stateKey(id, k), stateValue(id, valueSeed, k, valueSize)
				written += int64(len(key) + len(value))
				if err := batch.Set(key, value); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			tb.Fatal(err)
		}
	}
	return written
}

// overwrittenKeys returns, per owner, the keys overwriteBenchState(…,
// seed, …) picks.
func overwrittenKeys(ids []string, keysPerOwner, seed uint64) map[string]map[uint64]bool {
	rng := rand.New(rand.NewPCG(seed, 42))
	out := map[string]map[uint64]bool{}
	for _, id := range ids {
		out[id] = map[uint64]bool{}
		for range keysPerOwner / 100 {
			out[id][rng.Uint64N(keysPerOwner)] = true
		}
	}
	return out
}

// waitStateQuiet waits until neither the local tables under dir nor the
// remote objects st refers to have changed for three seconds: Pebble
// compacts in the background after a bulk load.
func waitStateQuiet(tb testing.TB, st *state.Store, dir string) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Minute)
	var prev []string
	for stable := 0; stable < 3; {
		if time.Now().After(deadline) {
			tb.Fatal("Pebble still compacting after 10 minutes")
		}
		// Glob, not ListFiles: a table deleted mid-walk is not an error.
		cur, err := filepath.Glob(filepath.Join(dir, "*", "*.sst"))
		if err != nil {
			tb.Fatal(err)
		}
		objs, err := st.LiveRemoteObjects()
		if err != nil {
			tb.Fatal(err)
		}
		for _, o := range objs {
			cur = append(cur, o.Key)
		}
		slices.Sort(cur)
		if slices.Equal(cur, prev) {
			stable++
		} else {
			stable = 0
		}
		prev = cur
		time.Sleep(time.Second)
	}
}
