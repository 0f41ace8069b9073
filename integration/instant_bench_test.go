package integration

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/integration/miniotest"
	"github.com/tidemark-io/tidemark/state"
)

// BenchmarkInstantRestore compares, on MinIO, three ways of resuming a
// job's real Pebble state on an empty node:
//
//   - local: download-then-open (blobstorage.Storage downloads every
//     file, then the state opens from local disk);
//   - remote-all: state in remote mode with every SST in the store; the
//     restore downloads the local part (MANIFEST, OPTIONS, WAL, catalog)
//     and reads blocks on demand through the secondary cache;
//   - remote-lower: remote mode with only L5 and L6 in the store.
//
// For each state size (TIDEMARK_BENCH_INSTANT_MIB, comma-separated MiB,
// default "256,1024"; two owners, 1 KiB incompressible values) it builds
// the state of every mode (buildBenchState), takes a full checkpoint,
// overwrites 1 % of the keys and takes an incremental one. Then, in
// TIDEMARK_BENCH_INSTANT_ROUNDS rounds (default 3), alternating the
// modes, it restores each checkpoint in a child process (the test binary
// re-executed: a fresh process on a fresh directory, nothing of the
// state in its memory) and measures from the child's start:
//
//   - first read: the restore (download), the open, and one correct Get
//     per owner;
//   - full speed: random point Gets, with Store.Hydrate running in the
//     background in remote mode, until a second of them runs at 80 % of
//     the read rate of local mode (the median of its 1 s rates); the
//     table also gives the rate of the last second read, after
//     hydration, as a percentage of local mode's;
//
// and in a second child per mode and round: 1000 random Gets on the cold
// state, Store.Hydrate in the foreground, then 20000 Gets on the warm
// state (the secondary cache holds 1.25 × an owner's share).
//
// Checkpoint figures, per mode: the full checkpoint (what Save uploaded
// and its HTTP requests; Pebble's uploads while building are apart) and
// the incremental one, counted from the overwrite through a checkpoint,
// quiet compactions and a second checkpoint, so that compaction output is
// charged in every mode (local mode uploads it with the next checkpoint,
// remote mode as Pebble writes it).
//
// It prints one table for all sizes. Run it once:
//
//	TIDEMARK_MINIO=process TIDEMARK_BENCH_INSTANT_MIB=1024,4096 go test -run '^$' -bench BenchmarkInstantRestore -benchtime=1x -timeout 120m ./integration/
func BenchmarkInstantRestore(b *testing.B) {
	sizes := []int{256, 1024}
	if s := os.Getenv("TIDEMARK_BENCH_INSTANT_MIB"); s != "" {
		sizes = nil
		for f := range strings.SplitSeq(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n <= 0 {
				b.Fatalf("TIDEMARK_BENCH_INSTANT_MIB=%q: want comma-separated positive numbers of MiB", s)
			}
			sizes = append(sizes, n)
		}
	}
	rounds := envInt(b, "TIDEMARK_BENCH_INSTANT_ROUNDS", 3)
	var all [][]*instantMode
	for _, mib := range sizes {
		b.Run(fmt.Sprintf("%dMiB", mib), func(b *testing.B) {
			all = append(all, benchInstant(b, mib, rounds))
		})
	}
	if len(all) > 0 {
		fmt.Print(instantTable(all))
	}
}

// instantMode is one contender at one size, and what was measured.
type instantMode struct {
	name   string
	remote bool
	levels state.RemoteLevels

	mib      int
	prefix   string // the job's store in the bucket
	id       string // the checkpoint restored
	tables   int    // remote objects it refers to
	built    time.Duration
	pebbleUp int64 // bytes Pebble wrote into the store while building
	full     blobCounts
	fullReqs int64
	written  int64 // bytes the incremental checkpoint's overwrite wrote
	nextUp   int64 // Save and Pebble, overwrite to the next checkpoint
	nextReqs int64
	incrUp   int64 // Save and Pebble, overwrite to quiet compactions and a second checkpoint
	incrReqs int64

	first, download, open, get []float64
	downB                      []int64
	timelines                  [][]instantTimedEvent
	fullSpeed                  []float64 // NaN: not reached
	lastRate                   []float64 // the last second's read rate, as a fraction of local mode's
	cold, warm, hydrate        []float64
	coldGets, coldStats        []float64 // per cold read
	warmReqs                   []float64 // GETs and Stats per warm read
}

func benchInstant(b *testing.B, mib, rounds int) []*instantMode {
	const valueSize = 1024
	ids := []string{"op-0", "op-1"}
	keysPerOwner := uint64(mib) << 20 / valueSize / uint64(len(ids))
	ctx := context.Background()
	srv := miniotest.Shared(b)
	bucket := srv.NewBucket(b)
	raw, requests := openCountedBucket(b, srv, bucket, 0)
	modes := []*instantMode{
		{name: "local"},
		{name: "remote-all", remote: true, levels: state.RemoteAllLevels},
		{name: "remote-lower", remote: true, levels: state.RemoteLowerLevels},
	}

	// Build the state of every mode and checkpoint it.
	for _, m := range modes {
		m.mib, m.prefix = mib, "job-"+m.name
		ckptCounts, pebbleCounts := blobstoretest.Intercept(raw, blobstoretest.Hooks{}), blobstoretest.Intercept(raw, blobstoretest.Hooks{})
		job, err := blobstore.WithPrefix(ckptCounts, m.prefix)
		if err != nil {
			b.Fatal(err)
		}
		pebbleJob, err := blobstore.WithPrefix(pebbleCounts, m.prefix)
		if err != nil {
			b.Fatal(err)
		}
		w := blobstorage.New(job, b.TempDir(), blobstorage.Options{})
		epoch, err := w.Acquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		opts := state.Options{MemTableSize: 64 << 20, CacheSize: 64 << 20}
		if m.remote {
			opts.Remote = state.RemoteOptions{Store: pebbleJob, Prefix: blobstorage.RemotePrefix, Generation: fmt.Sprintf("e%d", epoch), Levels: m.levels}
		}
		live := filepath.Join(b.TempDir(), "live")
		st, err := state.Open(live, opts)
		if err != nil {
			b.Fatal(err)
		}
		if m.remote {
			// Checkpoints reference the objects instead of uploading them.
			w.UseRemote(st.CheckpointRemote())
		}
		m.built = buildBenchState(b, st, live, ids, keysPerOwner, valueSize)
		m.pebbleUp = counts(pebbleCounts).up
		var seq uint64
		save := func() (string, blobCounts, int64) {
			seq++
			id := checkpoint.NewID(seq)
			dirs, err := st.Checkpoint(ctx, w.StateDir(id))
			if err != nil {
				b.Fatal(err)
			}
			c0, r0 := counts(ckptCounts), requests.n.Load()
			if err := w.Save(ctx, completedRecord(id, dirs)); err != nil {
				b.Fatalf("Save(%s): %v", id, err)
			}
			return id, counts(ckptCounts).sub(c0), requests.n.Load() - r0
		}
		_, m.full, m.fullReqs = save()

		c0, p0, r0 := counts(ckptCounts), counts(pebbleCounts), requests.n.Load()
		m.written = overwriteBenchState(b, st, ids, keysPerOwner, valueSize, 1, 2)
		save()
		m.nextUp = counts(ckptCounts).sub(c0).up + counts(pebbleCounts).sub(p0).up
		m.nextReqs = requests.n.Load() - r0
		waitStateQuiet(b, st, live)
		m.id, _, _ = save()
		m.incrUp = counts(ckptCounts).sub(c0).up + counts(pebbleCounts).sub(p0).up
		m.incrReqs = requests.n.Load() - r0
		objs, err := st.RemoteObjects(ctx, w.StateDir(m.id))
		if err != nil {
			b.Fatal(err)
		}
		m.tables = len(objs)
		b.Logf("%s: built in %v; full checkpoint: Save %s, %d requests; incremental (%.1f MiB written): %.1f MiB uploaded, %d requests by its checkpoint, %.1f MiB, %d requests with compactions; %d remote objects",
			m.name, m.built.Round(time.Millisecond), m.full.div(1), m.fullReqs, float64(m.written)/(1<<20),
			float64(m.nextUp)/(1<<20), m.nextReqs, float64(m.incrUp)/(1<<20), m.incrReqs, len(objs))
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
		// The checkpoint is in the store; free the disk for the next mode.
		if err := os.RemoveAll(live); err != nil {
			b.Fatal(err)
		}
		if err := os.RemoveAll(w.StateDir(m.id)); err != nil {
			b.Fatal(err)
		}
	}

	job := func(m *instantMode, kind string, i int) instantJob {
		return instantJob{
			Kind: kind, Endpoint: srv.Endpoint, Region: srv.Region, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey,
			Bucket: bucket, Prefix: m.prefix, ID: m.id,
			Remote: m.remote, RemotePrefix: blobstorage.RemotePrefix, Levels: m.levels, Generation: fmt.Sprintf("e%d", 100+i),
			CacheSize: int64(mib) << 20 / int64(len(ids)) * 5 / 4,
			Owners:    ids, KeysPerOwner: keysPerOwner, ValueSize: valueSize, Overwrite: 1, Seed: uint64(1000 + i),
			ColdReads: 1000, WarmReads: 20000,
			Window: 250 * time.Millisecond, Tail: 3 * time.Second, Max: 10 * time.Minute,
		}
	}
	b.ResetTimer()
	for r := range rounds {
		for j := range modes {
			m := modes[(r+j)%len(modes)]
			dir := b.TempDir()
			jb := job(m, "timeline", r)
			jb.Dir = dir
			events := runInstantChild(b, jb)
			first := eventOf(b, events, "first")
			m.first = append(m.first, first.At.Seconds())
			m.download = append(m.download, first.Download)
			m.open = append(m.open, first.Open)
			m.get = append(m.get, first.Get)
			m.downB = append(m.downB, first.DownB)
			m.timelines = append(m.timelines, events)
			if err := os.RemoveAll(dir); err != nil {
				b.Fatal(err)
			}
		}
		for j := range modes {
			m := modes[(r+j)%len(modes)]
			dir := b.TempDir()
			jb := job(m, "reads", r)
			jb.Dir = dir
			events := runInstantChild(b, jb)
			cold, warm, hyd := eventOf(b, events, "cold"), eventOf(b, events, "warm"), eventOf(b, events, "hydrated")
			m.cold = append(m.cold, float64(cold.Reads)/cold.Secs)
			m.coldGets = append(m.coldGets, float64(cold.Gets)/float64(cold.Reads))
			m.coldStats = append(m.coldStats, float64(cold.Stats)/float64(cold.Reads))
			m.warmReqs = append(m.warmReqs, float64(warm.Gets+warm.Stats)/float64(warm.Reads))
			m.warm = append(m.warm, float64(warm.Reads)/warm.Secs)
			m.hydrate = append(m.hydrate, hyd.Secs)
			if err := os.RemoveAll(dir); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()

	// Full speed: a second of reads at 80 % of local mode's rate (the
	// median, over local timelines, of their 1 s rates).
	var localRates []float64
	for _, tl := range modes[0].timelines {
		localRates = append(localRates, median(secondRates(tl)))
	}
	target := 0.8 * median(localRates)
	for _, m := range modes {
		for _, tl := range m.timelines {
			m.fullSpeed = append(m.fullSpeed, fullSpeedAt(tl, target))
			// The rate once the state is hydrated: the last second.
			r := secondRates(tl)
			m.lastRate = append(m.lastRate, r[len(r)-1]/median(localRates))
		}
		b.ReportMetric(median(m.first), m.name+"-first-read-s")
	}
	return modes
}

// eventOf returns the first event named ev.
func eventOf(b *testing.B, events []instantTimedEvent, ev string) instantTimedEvent {
	b.Helper()
	for _, e := range events {
		if e.Ev == ev {
			return e
		}
	}
	b.Fatalf("instant child: no %q event in %+v", ev, events)
	return instantTimedEvent{}
}

// secondRates returns the read rates of the timeline's windows, each
// averaged with the three before it (a second of 250 ms windows).
func secondRates(events []instantTimedEvent) []float64 {
	var reads []int
	var secs []float64
	for _, e := range events {
		if e.Ev == "window" {
			reads, secs = append(reads, e.Reads), append(secs, e.Secs)
		}
	}
	out := make([]float64, len(reads))
	for i := range reads {
		n, d := 0, 0.0
		for j := max(0, i-3); j <= i; j++ {
			n, d = n+reads[j], d+secs[j]
		}
		out[i] = float64(n) / d
	}
	return out
}

// fullSpeedAt returns when (seconds since the child started) the first
// second of reads at target reads/s or more ended (see secondRates), or
// NaN if none did.
func fullSpeedAt(events []instantTimedEvent, target float64) float64 {
	rates := secondRates(events)
	i := 0
	for _, e := range events {
		if e.Ev != "window" {
			continue
		}
		if i >= 3 && rates[i] >= target {
			return e.At.Seconds()
		}
		i++
	}
	return math.NaN()
}

// reached returns the values of xs that are not NaN.
func reached(xs []float64) []float64 {
	var out []float64
	for _, x := range xs {
		if !math.IsNaN(x) {
			out = append(out, x)
		}
	}
	return out
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// instantTable renders the figures of every size as a Markdown table,
// then the flatness of the first read across sizes.
func instantTable(all [][]*instantMode) string {
	var sb strings.Builder
	f := func(x float64) string {
		if math.IsNaN(x) {
			return "not reached"
		}
		return fmt.Sprintf("%.2f", x)
	}
	rng := func(all []float64) string {
		xs := reached(all)
		if len(xs) == 0 {
			return "not reached"
		}
		out := fmt.Sprintf("%s (%s–%s)", f(median(xs)), f(slices.Min(xs)), f(slices.Max(xs)))
		if len(xs) < len(all) {
			out += fmt.Sprintf(", reached %d of %d", len(xs), len(all))
		}
		return out
	}
	mibs := func(n int64) string { return fmt.Sprintf("%.1f", float64(n)/(1<<20)) }
	fmt.Fprintln(&sb)
	fmt.Fprintln(&sb, "| state | mode | first read, s | download / open / get, s | downloaded, MiB | full speed, s (then, % of local) | cold reads/s (GETs, HEADs each) | warm reads/s (requests each) | hydrate, s | full checkpoint: up MiB, requests | incremental: written MiB; up MiB, requests by its checkpoint; with compactions |")
	fmt.Fprintln(&sb, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, modes := range all {
		for _, m := range modes {
			var down []float64
			for _, d := range m.downB {
				down = append(down, float64(d))
			}
			hyd := f(median(m.hydrate))
			if !m.remote {
				hyd = "–"
			}
			fmt.Fprintf(&sb, "| %d MiB | %s | %s | %s / %s / %s | %s | %s (%.0f %%) | %.0f (%.2f, %.2f) | %.0f (%.3f) | %s | %s, %d | %s; %s, %d; %s, %d |\n",
				m.mib, m.name, rng(m.first), f(median(m.download)), f(median(m.open)), f(median(m.get)),
				mibs(int64(median(down))), rng(m.fullSpeed), 100*median(m.lastRate), median(m.cold), median(m.coldGets), median(m.coldStats), median(m.warm), median(m.warmReqs), hyd,
				mibs(m.full.up), m.fullReqs, mibs(m.written), mibs(m.nextUp), m.nextReqs, mibs(m.incrUp), m.incrReqs)
		}
	}
	if len(all) >= 2 {
		lo, hi := all[0], all[len(all)-1]
		fmt.Fprintf(&sb, "\nfirst read, %d MiB / %d MiB (medians):", hi[0].mib, lo[0].mib)
		for i, m := range hi {
			fmt.Fprintf(&sb, " %s %.2f×", m.name, median(m.first)/median(lo[i].first))
		}
		fmt.Fprintln(&sb)
	}
	return sb.String()
}
