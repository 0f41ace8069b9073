package integration

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore"
	tmjs "github.com/tidemark-io/tidemark/connector/jetstream"
	"github.com/tidemark-io/tidemark/integration/miniotest"
	"github.com/tidemark-io/tidemark/integration/natstest"
	"github.com/tidemark-io/tidemark/job"
	"github.com/tidemark-io/tidemark/job/jobtest"
	"github.com/tidemark-io/tidemark/s3store"
	"github.com/tidemark-io/tidemark/state"
)

// TestWorkersRemoteStateRescaleOpensTablesInPlace: a workers job of the
// runtime (job.RunCoordinator, job.RunWorker, a NATS Group) on MinIO with
// its state in remote mode runs with 2 slots, is killed, resumes
// with 1 slot, is killed again and finishes with 3, each resume on empty
// disks. Every partition's output holds each input once with its running
// total, and no worker of a resumed job downloaded a state table (a GET of
// a whole .sst object) before it processed its first record. The same job
// in local mode downloads its tables first: the check can fail.
func TestWorkersRemoteStateRescaleOpensTablesInPlace(t *testing.T) {
	srv := miniotest.Shared(t)
	nats := natstest.StartEmbedded(t)
	for _, mode := range []string{"all", ""} {
		name := "remote-" + mode
		if mode == "" {
			name = "local"
		}
		t.Run(name, func(t *testing.T) {
			raw, err := s3store.New(t.Context(), s3store.Options{
				Bucket: srv.NewBucket(t), Endpoint: srv.Endpoint, Region: srv.Region, PathStyle: true,
				AccessKey: srv.AccessKey, SecretKey: srv.SecretKey,
			})
			if err != nil {
				t.Fatal(err)
			}
			runRescaledWorkers(t, raw, nats.JetStream(t), mode)
		})
	}
}

// rescalePhase is one run of the job: its slots, each with its
// partitions, how far it reads, and whether it runs to the end or is
// killed.
type rescalePhase struct {
	slots map[string][]string
	upTo  int // how far each partition is read (0: to its end)
	last  bool
}

func runRescaledWorkers(t *testing.T, raw blobstore.Blobstore, js natsjs.JetStream, mode string) {
	const perPartition = 1500
	parts := []string{"p0", "p1", "p2", "p3"}
	tables := &tableReads{Blobstore: raw}
	sinkOf := func(slot string) *job.BlobSink { return job.NewBlobSink(raw, "out/"+slot+"/") }
	phases := []rescalePhase{
		{slots: map[string][]string{"a": {"p0", "p1"}, "b": {"p2", "p3"}}, upTo: perPartition / 3},
		{slots: map[string][]string{"a": parts}, upTo: perPartition * 2 / 3},
		{slots: map[string][]string{"a": {"p0"}, "b": {"p1"}, "c": {"p2", "p3"}}, last: true},
	}
	var storage *blobstorage.Storage
	var last string
	for i, ph := range phases {
		slots := slices.Sorted(func(yield func(string) bool) {
			for s := range ph.slots {
				if !yield(s) {
					return
				}
			}
		})
		// A Group of its own per run (a KV bucket), as a redeploy would have.
		bucket := fmt.Sprintf("rescale-%s-%d", cmp.Or(mode, "local"), i)
		group := func(ctx context.Context) job.Group {
			g, err := tmjs.NewGroup(ctx, js, bucket, 1)
			if err != nil {
				t.Error(err)
			}
			return g
		}
		var completed atomic.Int64
		var announced atomic.Int64 // the first generation's announcement, in ns
		// GC after every checkpoint, keeping one, beside the workers, with
		// a Grace above a barrier's Timeout.
		storage = blobstorage.New(raw, filepath.Join(t.TempDir(), "checkpoints"), blobstorage.Options{Keep: 1, Grace: 20 * time.Second})
		coord := jobtest.Go(t, func(ctx context.Context) (job.Result, error) {
			return job.RunCoordinator(ctx, job.CoordinatorConfig{
				Group: group(ctx), Storage: storage, Slots: slots,
				Sink:     func(slot string) (job.Sink, error) { return sinkOf(slot), nil },
				Interval: 100 * time.Millisecond, Timeout: 10 * time.Second, GCEvery: 1,
				Observe: func(e job.Event) {
					if e.Kind == "checkpoint" {
						completed.Add(1)
					}
					if e.Kind == "start" {
						announced.CompareAndSwap(0, time.Now().UnixNano())
					}
				},
			})
		})
		var batches atomic.Uint64
		full0, fullBytes0, ranged0 := tables.snapshot()
		firsts := make(map[string]*firstRecord, len(slots))
		var workers []*jobtest.Node
		for _, slot := range slots {
			f := &firstRecord{}
			firsts[slot] = f
			owners := make([]string, len(ph.slots[slot]))
			for j, p := range ph.slots[slot] {
				owners[j] = "sum-" + p
			}
			workers = append(workers, jobtest.Go(t, func(ctx context.Context) (job.Result, error) {
				return job.RunWorker(ctx, job.WorkerConfig{
					Group: group(ctx), Slot: slot, Blobstore: tables, Dir: t.TempDir(),
					Source: func(context.Context) (job.Source, error) {
						// Called once the generation's state is open.
						f.openOnce.Do(func() { f.opened = time.Since(time.Unix(0, announced.Load())) })
						return &partSource{parts: ph.slots[slot], n: perPartition, batch: 10, upTo: ph.upTo}, nil
					},
					Processor:   partSummer{pad: 1024, pause: 3 * time.Millisecond},
					Sink:        sinkOf(slot),
					Owners:      owners,
					State:       state.Options{MemTableSize: 256 << 10, CacheSize: 1 << 20},
					RemoteState: mode,
					Observe: func(e job.Event) {
						if e.Kind == "batch" {
							f.once.Do(func() {
								f.took = time.Since(time.Unix(0, announced.Load()))
								full, fullBytes, ranged := tables.snapshot()
								f.full, f.fullBytes, f.rangedBytes = full-full0, fullBytes-fullBytes0, ranged-ranged0
							})
							batches.Add(1)
						}
					},
				})
			}))
		}
		if !ph.last {
			deadline := time.Now().Add(3 * time.Minute)
			for completed.Load() < 3 || batches.Load() < 60 {
				if time.Now().After(deadline) {
					t.Fatalf("phase %d: %d checkpoints and %d batches in 3 min", i+1, completed.Load(), batches.Load())
				}
				time.Sleep(10 * time.Millisecond)
			}
			coord.Cancel()
			for _, w := range append(workers, coord) {
				w.Cancel()
				if _, err := w.Wait(t); err != nil && !errors.Is(err, context.Canceled) {
					t.Fatalf("phase %d: %v", i+1, err)
				}
			}
		} else {
			res, err := coord.Wait(t)
			if err != nil {
				t.Fatalf("phase %d: coordinator: %v", i+1, err)
			}
			if res.Restored == "" {
				t.Fatalf("phase %d restored nothing", i+1)
			}
			last = res.Last
			for _, w := range workers {
				if _, err := w.Wait(t); err != nil {
					t.Fatalf("phase %d: worker: %v", i+1, err)
				}
			}
		}
		if i == 0 {
			if n := countTables(t, raw, "remote/"); mode != "" && n == 0 {
				t.Fatal("the first run created no remote table: nothing to open in place")
			}
			continue
		}
		// After a resume, what the workers read of the tables before each
		// one's first record.
		downloaded := false
		for _, slot := range slots {
			f := firsts[slot]
			t.Logf("mode %q, %d → %d slots, slot %s: state open %v and first record %v after the generation's announcement; before it, the job's GETs of whole tables: %d (%d B), ranged reads of tables: %d B",
				mode, len(phases[i-1].slots), len(slots), slot, f.opened.Round(time.Millisecond), f.took.Round(time.Millisecond), f.full, f.fullBytes, f.rangedBytes)
			if mode != "" && f.full > 0 {
				t.Errorf("phase %d, slot %s: %d whole tables (%d B) downloaded before the first record: the state was not opened in place", i+1, slot, f.full, f.fullBytes)
			}
			downloaded = downloaded || f.full > 0
		}
		if mode == "" && !downloaded {
			t.Errorf("phase %d in local mode downloaded no table before the first record: the check cannot tell the modes apart", i+1)
		}
	}
	if mode != "" {
		if n, _, _ := tables.snapshot(); n != 0 {
			t.Errorf("remote mode: %d whole tables were downloaded during the job", n)
		}
	}
	// The coordinator's GC deletes the tables of its epoch that the
	// workers' databases made obsolete, and nothing the last checkpoint
	// references.
	rep, err := storage.GC(t.Context(), blobstorage.GCOptions{Now: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	obsolete := 0
	for _, d := range rep.Deletions {
		if d.Reason == blobstorage.DropRemoteObsolete {
			obsolete++
		}
	}
	t.Logf("mode %q: the last GC deleted %d obsolete tables of the last epoch", mode, obsolete)
	rec, err := storage.LoadRecord(t.Context(), last)
	if err != nil {
		t.Fatal(err)
	}
	referenced := map[string]bool{}
	for _, refs := range rec.Remote {
		for _, r := range refs {
			referenced[r.Key] = true
		}
	}
	for info, err := range raw.List(t.Context(), blobstorage.RemotePrefix+"/") {
		if err != nil {
			t.Fatal(err)
		}
		if !referenced[info.Key] {
			t.Errorf("after GC, remote table %s is referenced by no checkpoint kept", info.Key)
		}
	}
	if err := storage.Verify(t.Context(), last); err != nil {
		t.Fatalf("verify %s: %v", last, err)
	}
	byPart := map[string][]job.Record{}
	for _, slot := range []string{"a", "b", "c"} {
		for _, r := range jobtest.BlobOutput(t, sinkOf(slot)) {
			p, _, _ := strings.Cut(string(r.Key), "/")
			byPart[p] = append(byPart[p], r)
		}
	}
	for _, p := range parts {
		checkPartition(t, p, byPart[p], perPartition)
	}
}

// firstRecord is what one worker read of the tables before its first
// record.
type firstRecord struct {
	once, openOnce         sync.Once
	opened, took           time.Duration
	full                   int64
	fullBytes, rangedBytes int64
}

// countTables counts the .sst objects under prefix.
func countTables(t *testing.T, bs blobstore.Blobstore, prefix string) int {
	t.Helper()
	n := 0
	for info, err := range bs.List(t.Context(), prefix) {
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(info.Key, ".sst") {
			n++
		}
	}
	return n
}

// checkPartition checks that out holds the numbers 1…n of partition p
// once each, each with the running total since 1: nothing lost, nothing
// twice, in the output or in the state.
func checkPartition(t *testing.T, p string, out []job.Record, n int) {
	t.Helper()
	seen := make([]bool, n+1)
	for _, r := range out {
		_, num, _ := strings.Cut(string(r.Key), "/")
		k, err := strconv.Atoi(num)
		if err != nil || k < 1 || k > n {
			t.Fatalf("partition %s: output record %q", p, r.Key)
		}
		if seen[k] {
			t.Fatalf("partition %s: %d output twice", p, k)
		}
		seen[k] = true
		if got, want := string(r.Value), strconv.Itoa(k*(k+1)/2); got != want {
			t.Fatalf("partition %s: %d carries total %s, want %s (the state lost or double-counted)", p, k, got, want)
		}
	}
	if len(out) != n {
		t.Errorf("partition %s: %d records output, want %d", p, len(out), n)
	}
}

// tableReads counts the GETs of whole state tables (.sst objects, the
// way a restore downloads them) and the bytes read of tables, whole or
// in ranges (the way Pebble reads a table in place).
type tableReads struct {
	blobstore.Blobstore
	full, fullBytes, rangedBytes atomic.Int64
}

func (c *tableReads) Unwrap() blobstore.Blobstore { return c.Blobstore }

func (c *tableReads) snapshot() (full, fullBytes, rangedBytes int64) {
	return c.full.Load(), c.fullBytes.Load(), c.rangedBytes.Load()
}

func (c *tableReads) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	rc, err := c.Blobstore.Get(ctx, key)
	if err != nil || !strings.HasSuffix(key, ".sst") {
		return rc, err
	}
	c.full.Add(1)
	return countedBody{rc, &c.fullBytes}, nil
}

func (c *tableReads) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	rc, err := c.Blobstore.GetRange(ctx, key, off, n)
	if err != nil || !strings.HasSuffix(key, ".sst") {
		return rc, err
	}
	return countedBody{rc, &c.rangedBytes}, nil
}

type countedBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b countedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// partSource reads partitions of the numbers 1…n each, a batch of one
// partition at a time in turn. Its offsets are a JSON object keyed by
// partition; Seek takes its own partitions of a merged one. With upTo
// set it stops there without ending: the run is killed before its input
// ends, however slow its checkpoints are.
type partSource struct {
	parts    []string
	n, batch int
	upTo     int
	next     map[string]int
	turn     int
}

func (s *partSource) Seek(_ context.Context, off []byte) error {
	all := map[string]int{}
	if off != nil {
		if err := json.Unmarshal(off, &all); err != nil {
			return err
		}
	}
	s.next = map[string]int{}
	for _, p := range s.parts {
		s.next[p] = all[p]
	}
	return nil
}

func (s *partSource) Next(ctx context.Context) ([]job.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	end := s.n
	if s.upTo > 0 {
		end = min(s.upTo, s.n)
	}
	for range s.parts {
		p := s.parts[s.turn%len(s.parts)]
		s.turn++
		if s.next[p] >= end {
			continue
		}
		var out []job.Record
		for range s.batch {
			if s.next[p] == end {
				break
			}
			s.next[p]++
			out = append(out, job.Record{Key: fmt.Appendf(nil, "%s/%d", p, s.next[p])})
		}
		return out, nil
	}
	if end < s.n {
		time.Sleep(5 * time.Millisecond) // idle, not ended: checkpoints go on
		return nil, nil
	}
	return nil, io.EOF
}

func (s *partSource) Offsets() ([]byte, error) { return json.Marshal(s.next) }

// partSummer keeps a running total per partition in owner sum-<p> and
// outputs each number with the total after it; each record also writes
// pad bytes of its own, so that the state spans tables.
type partSummer struct {
	pad   int
	pause time.Duration
}

func (s partSummer) Process(_ context.Context, st *state.Store, in []job.Record) ([]job.Record, error) {
	out := make([]job.Record, len(in))
	for i, r := range in {
		p, num, _ := strings.Cut(string(r.Key), "/")
		o, err := st.Owner("sum-" + p)
		if err != nil {
			return nil, err
		}
		v, _, err := o.Get([]byte("total"))
		if err != nil {
			return nil, err
		}
		total, _ := strconv.Atoi(string(v))
		n, _ := strconv.Atoi(num)
		total += n
		if err := o.Set([]byte("total"), []byte(strconv.Itoa(total))); err != nil {
			return nil, err
		}
		if err := o.Set([]byte("pad/"+num), padding(n, s.pad)); err != nil {
			return nil, err
		}
		out[i] = job.Record{Key: r.Key, Value: []byte(strconv.Itoa(total))}
	}
	time.Sleep(s.pause)
	return out, nil
}

// padding returns size bytes that do not compress, made from seed.
func padding(seed, size int) []byte {
	b := make([]byte, size)
	x := uint64(seed)*0x9E3779B97F4A7C15 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
	return b
}
