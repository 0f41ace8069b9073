package integration

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/state"
)

// S3 Standard request prices, US East (N. Virginia), in dollars per
// 1,000 requests, as AWS lists them (unchanged since 2018; taken from
// the published price list, not fetched by this benchmark). HEAD is
// billed as a GET; DELETE and AbortMultipartUpload are free.
const (
	priceDate     = "2026-12-02"
	pricePutClass = 0.005  // PUT, COPY, POST, LIST
	priceGetClass = 0.0004 // GET, HEAD and all other requests
)

// BenchmarkCheckpointCost prints what each operation of the protocol
// costs in S3 requests, on real Pebble state in MinIO, and what
// checkpointing costs per day at 1 s, 10 s and 60 s intervals:
//
//   - full: the first two-phase checkpoint (prepared, then completed);
//   - incremental: a two-phase checkpoint after 1% of the keys changed;
//   - restore: the latest checkpoint on an empty node;
//   - rescale: two workers each restoring the one owner they gain;
//   - gc: one run after Keep+5 checkpoints.
//
// Run it once (TIDEMARK_BENCH_STATE_MIB sets the state size, default 64):
//
//	TIDEMARK_MINIO=process go test -run '^$' -bench BenchmarkCheckpointCost -benchtime=1x ./integration/
func BenchmarkCheckpointCost(b *testing.B) {
	stateMiB := envInt(b, "TIDEMARK_BENCH_STATE_MIB", 64)
	const (
		valueSize = 1024
		owners    = 2
		gcEvery   = 5 // the runtime's default: a GC every 5 checkpoints
	)
	keysPerOwner := uint64(stateMiB) << 20 / valueSize / owners
	ctx := context.Background()
	raw, requests := countedBucket(b, 0)
	keys := &keyLog{Blobstore: raw}
	bs, err := blobstore.WithPrefix(keys, "job")
	if err != nil {
		b.Fatal(err)
	}
	ids := []string{"op-0", "op-1"}
	live := filepath.Join(b.TempDir(), "live")
	st, err := state.Open(live, state.Options{MemTableSize: 64 << 20, CacheSize: 64 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	buildBenchState(b, st, live, ids, keysPerOwner, valueSize)

	w := blobstorage.New(bs, b.TempDir(), blobstorage.Options{})
	var rows []costRow
	measure := func(name string, op func()) costRow {
		before := requests.snapshot()
		keys.reset()
		op()
		r := costRow{name: name, writes: keys.classes()}
		for k, n := range requests.snapshot() {
			r.kinds[k] = n - before[k]
		}
		rows = append(rows, r)
		return r
	}
	measure("acquire (once per start)", func() {
		if _, err := w.Acquire(ctx); err != nil {
			b.Fatal(err)
		}
	})
	seq := uint64(0)
	twoPhase := func() string {
		seq++
		id := checkpoint.NewID(seq)
		dirs, err := st.Checkpoint(ctx, w.StateDir(id))
		if err != nil {
			b.Fatal(err)
		}
		d := completedRecord(id, dirs)
		d.Status = checkpoint.StatusPrepared
		if err := w.Save(ctx, d); err != nil {
			b.Fatalf("Save(%s): %v", id, err)
		}
		if err := w.UpdateStatus(ctx, id, checkpoint.StatusCompleted); err != nil {
			b.Fatalf("UpdateStatus(%s): %v", id, err)
		}
		return id
	}
	measure("full checkpoint", func() { twoPhase() })
	rng := rand.New(rand.NewPCG(1, 2))
	churn := func() {
		for _, id := range ids {
			o, err := st.Owner(id)
			if err != nil {
				b.Fatal(err)
			}
			err = o.Apply(func(batch *state.Batch) error {
				for range keysPerOwner / 100 {
					k := rng.Uint64N(keysPerOwner)
					if err := batch.Set(stateKey(id, k), stateValue(id, seq+100, k, valueSize)); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	churn()
	incr := measure("incremental checkpoint (1% churn)", func() { twoPhase() })
	for range blobstorage.DefaultKeep + 4 {
		churn()
		twoPhase()
	}
	last := checkpoint.NewID(seq)
	measure("restore on an empty node", func() {
		if err := blobstorage.New(bs, b.TempDir(), blobstorage.Options{}).Restore(ctx, last); err != nil {
			b.Fatal(err)
		}
	})
	measure("rescale to 2 workers (1 owner each)", func() {
		for i, o := range ids {
			wk, err := blobstorage.NewWorker(bs, b.TempDir(), blobstorage.NewWorkerID(fmt.Sprint("slot", i)), blobstorage.Options{})
			if err != nil {
				b.Fatal(err)
			}
			if err := wk.Restore(ctx, last, []string{o}); err != nil {
				b.Fatal(err)
			}
		}
	})
	gc := measure(fmt.Sprintf("gc (after %d checkpoints, keep %d)", seq, blobstorage.DefaultKeep), func() {
		if _, err := w.GC(ctx, blobstorage.GCOptions{}); err != nil {
			b.Fatal(err)
		}
	})

	var out strings.Builder
	fmt.Fprintf(&out, "state %d MiB in %d owners; requests per operation, and the request bill at S3 Standard prices (us-east-1, as listed on %s: $%.4f per 1,000 PUT/POST/LIST, $%.4f per 1,000 GET/HEAD, DELETE free)\n",
		stateMiB, owners, priceDate, pricePutClass, priceGetClass)
	fmt.Fprintf(&out, "| operation | PUT | POST | GET | HEAD | LIST | DELETE | $ | record / pointer / writer / pin writes |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&out, "| %s | %d | %d | %d | %d | %d | %d | %.7f | %s |\n", r.name,
			r.kinds[kindPut], r.kinds[kindPost], r.kinds[kindGet], r.kinds[kindHead], r.kinds[kindList], r.kinds[kindDelete], r.dollars(), r.protocolWrites())
	}
	perCkpt := incr.dollars() + gc.dollars()/gcEvery
	fmt.Fprintf(&out, "\ncheckpointing cost per day (an incremental checkpoint, plus a GC every %d):\n| interval | checkpoints/day | requests/day | $/day |\n|---|---|---|---|\n", gcEvery)
	for _, iv := range []time.Duration{time.Second, 10 * time.Second, time.Minute} {
		n := float64(24*time.Hour) / float64(iv)
		reqs := float64(incr.total()) + float64(gc.total())/gcEvery
		fmt.Fprintf(&out, "| %v | %.0f | %.0f | %.2f |\n", iv, n, n*reqs, n*perCkpt)
	}
	// Printed whole: testing cuts a benchmark's long log.
	fmt.Print(out.String())
	b.ReportMetric(float64(incr.total()), "requests/incremental")
	b.ReportMetric(perCkpt*86400, "$/day@1s")
}

// costRow is the request bill of one operation.
type costRow struct {
	name   string
	kinds  [numKinds]int64
	writes map[string]int
}

func (r costRow) total() int64 {
	var n int64
	for _, k := range r.kinds {
		n += k
	}
	return n
}

func (r costRow) dollars() float64 {
	putClass := r.kinds[kindPut] + r.kinds[kindPost] + r.kinds[kindList]
	getClass := r.kinds[kindGet] + r.kinds[kindHead] + r.kinds[kindOther]
	return (float64(putClass)*pricePutClass + float64(getClass)*priceGetClass) / 1000
}

// protocolWrites says how many of the operation's writes were records,
// pointers, the writer object and pins: the protocol's own bookkeeping.
func (r costRow) protocolWrites() string {
	return fmt.Sprintf("%d / %d / %d / %d", r.writes["record"], r.writes["pointer"], r.writes["writer"], r.writes["pin"])
}

// keyLog counts the Put* calls of a Blobstore by blobstorage.KeyClass.
type keyLog struct {
	blobstore.Blobstore
	mu  sync.Mutex
	put map[string]int
}

func (k *keyLog) Unwrap() blobstore.Blobstore { return k.Blobstore }

// GetWithInfo keeps the store's one-request read (blobstore.InfoGetter).
func (k *keyLog) GetWithInfo(ctx context.Context, key string) (io.ReadCloser, blobstore.ObjectInfo, error) {
	return blobstore.GetWithInfo(ctx, k.Blobstore, key)
}

func (k *keyLog) note(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.put == nil {
		k.put = map[string]int{}
	}
	// The prefix "job/" is below the key the Storage wrote.
	k.put[blobstorage.KeyClass(strings.TrimPrefix(key, "job/"))]++
}

func (k *keyLog) reset() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.put = map[string]int{}
}

func (k *keyLog) classes() map[string]int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return maps.Clone(k.put)
}

func (k *keyLog) Put(ctx context.Context, key string, r io.Reader) error {
	k.note(key)
	return k.Blobstore.Put(ctx, key, r)
}

func (k *keyLog) PutIfAbsent(ctx context.Context, key string, r io.Reader) (string, error) {
	k.note(key)
	return k.Blobstore.PutIfAbsent(ctx, key, r)
}

func (k *keyLog) PutIfMatch(ctx context.Context, key, etag string, r io.Reader) (string, error) {
	k.note(key)
	return k.Blobstore.PutIfMatch(ctx, key, etag, r)
}
