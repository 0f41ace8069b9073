package job_test

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/memstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/job"
	"github.com/tidemark-io/tidemark/job/jobtest"
)

// hub is an in-memory job.Group shared by the nodes of a test; each node
// uses its own handle (a coordinator's compare-and-set revision is its
// own, as with connector/jetstream's Group).
type hub struct {
	mu      sync.Mutex
	plan    job.Plan
	rev     uint64
	members map[string]string
	plans   map[chan job.Plan]bool
	mems    map[chan map[string]string]bool
	reports map[chan job.Report]bool
}

func newHub() *hub {
	return &hub{members: map[string]string{}, plans: map[chan job.Plan]bool{},
		mems: map[chan map[string]string]bool{}, reports: map[chan job.Report]bool{}}
}

type handle struct {
	h   *hub
	rev uint64
}

func (h *hub) handle() *handle { return &handle{h: h} }

func (g *handle) Lead(_ context.Context, epoch uint64) error {
	h := g.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.plan.Epoch > epoch {
		return checkpoint.ErrFenced
	}
	h.rev++
	h.plan, g.rev = job.Plan{Epoch: epoch}, h.rev
	h.sendPlanLocked()
	return nil
}

func (g *handle) Announce(_ context.Context, p job.Plan) error {
	h := g.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.rev != g.rev {
		return checkpoint.ErrFenced
	}
	h.rev++
	h.plan, g.rev = p, h.rev
	h.sendPlanLocked()
	return nil
}

func (h *hub) sendPlanLocked() {
	for ch := range h.plans {
		ch <- h.plan // buffered deep enough for a test
	}
}

func (h *hub) sendMembersLocked() {
	for ch := range h.mems {
		select {
		case <-ch:
		default:
		}
		ch <- maps.Clone(h.members)
	}
}

// sub registers ch in set until ctx is done, then closes it.
func sub[C any](ctx context.Context, h *hub, set map[chan C]bool, ch chan C) {
	set[ch] = true
	go func() {
		<-ctx.Done()
		h.mu.Lock()
		delete(set, ch)
		close(ch)
		h.mu.Unlock()
	}()
}

func (g *handle) Members(ctx context.Context) (<-chan map[string]string, error) {
	h := g.h
	h.mu.Lock()
	defer h.mu.Unlock()
	ch := make(chan map[string]string, 1)
	ch <- maps.Clone(h.members)
	sub(ctx, h, h.mems, ch)
	return ch, nil
}

func (g *handle) Reports(ctx context.Context) (<-chan job.Report, error) {
	h := g.h
	h.mu.Lock()
	defer h.mu.Unlock()
	ch := make(chan job.Report, 1024)
	sub(ctx, h, h.reports, ch)
	return ch, nil
}

func (g *handle) Join(ctx context.Context, slot, worker string) (<-chan job.Plan, error) {
	h := g.h
	h.mu.Lock()
	defer h.mu.Unlock()
	h.members[slot] = worker
	h.sendMembersLocked()
	ch := make(chan job.Plan, 4096)
	ch <- h.plan
	sub(ctx, h, h.plans, ch)
	return ch, nil
}

func (g *handle) Report(_ context.Context, r job.Report) error {
	h := g.h
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.reports {
		ch <- r
	}
	return nil
}

// TestWorkersKilledWorkerAndCoordinatorExactlyOnce: a job of two workers
// on a BlobSink per slot. A worker is killed mid-run and replaced on an
// empty disk, then the coordinator is killed and a standby takes over.
// Each slot's output holds each input's effect once, with the totals of
// one uninterrupted run.
//
// In remote mode (WorkerConfig.RemoteState) the replaced worker opens its
// owners where their tables are.
func TestWorkersKilledWorkerAndCoordinatorExactlyOnce(t *testing.T) {
	for _, mode := range []string{"", "all", "lower"} {
		t.Run("state="+cmp.Or(mode, "local"), func(t *testing.T) { killedWorkerAndCoordinator(t, mode) })
	}
}

func killedWorkerAndCoordinator(t *testing.T, mode string) {
	const n = 1500
	bucket := memstore.New()
	g := newHub()
	slots := []string{"a", "b"}
	sinkOf := func(slot string) *job.BlobSink { return job.NewBlobSink(bucket, "out/"+slot+"/") }
	var completed atomic.Int64
	coordinator := func() *jobtest.Node {
		disk := t.TempDir()
		return jobtest.Go(t, func(ctx context.Context) (job.Result, error) {
			return job.RunCoordinator(ctx, job.CoordinatorConfig{
				Group: g.handle(), Storage: node(t, bucket, disk), Slots: slots,
				Sink:     func(slot string) (job.Sink, error) { return sinkOf(slot), nil },
				Interval: 20 * time.Millisecond, Timeout: 5 * time.Second,
				Observe: func(e job.Event) {
					if e.Kind == job.EventCheckpoint {
						completed.Add(1)
					}
				},
			})
		})
	}
	var bRecords atomic.Uint64
	worker := func(slot string, bs blobstore.Blobstore) *jobtest.Node {
		return jobtest.Go(t, func(ctx context.Context) (job.Result, error) {
			return job.RunWorker(ctx, job.WorkerConfig{
				Group: g.handle(), Slot: slot, Blobstore: bs, Dir: t.TempDir(),
				Source:      func(context.Context) (job.Source, error) { return &source{n: n, batch: 10}, nil },
				Processor:   summer{owner: "sum-" + slot, pause: 2 * time.Millisecond}, // kills land mid-run
				Sink:        sinkOf(slot),
				Owners:      []string{"sum-" + slot},
				State:       smallState,
				RemoteState: mode,
				Observe: func(e job.Event) {
					if slot == "b" {
						bRecords.Store(e.Records)
					}
				},
			})
		})
	}
	c1 := coordinator()
	wa := worker("a", bucket)
	wb := worker("b", bucket)
	waitUntil(t, func() bool { return completed.Load() >= 1 && bRecords.Load() >= 200 })
	wb.Cancel()
	if _, err := wb.Wait(t); !errors.Is(err, context.Canceled) {
		t.Fatalf("worker b: %v, want it killed", err)
	}
	before := completed.Load()
	wb2 := worker("b", bucket)
	waitUntil(t, func() bool { return completed.Load() >= before+2 })
	c1.Cancel()
	if _, err := c1.Wait(t); !errors.Is(err, context.Canceled) {
		t.Fatalf("coordinator: %v, want it killed", err)
	}
	c2 := coordinator()
	res, err := c2.Wait(t)
	if err != nil {
		t.Fatalf("standby coordinator: %v", err)
	}
	if res.Restored == "" {
		t.Fatalf("the standby restored nothing: %+v", res)
	}
	for _, w := range []*jobtest.Node{wa, wb2} {
		if _, err := w.Wait(t); err != nil {
			t.Fatalf("worker: %v", err)
		}
	}
	for _, slot := range slots {
		checkExactlyOnce(t, jobtest.BlobOutput(t, sinkOf(slot)), n)
	}

	// Other slots resume only offsets they can merge (JSON objects keyed
	// by partition); these are numbers: refused, before anything.
	_, err = job.RunCoordinator(t.Context(), job.CoordinatorConfig{
		Group: g.handle(), Storage: node(t, bucket, t.TempDir()), Slots: []string{"a"},
		Sink: func(slot string) (job.Sink, error) { return sinkOf(slot), nil },
	})
	if !errors.Is(err, job.ErrConfig) {
		t.Fatalf("a coordinator with other slots: %v, want ErrConfig", err)
	}
}

// TestRunWorkerRefusesBadConfig: a worker without what it needs, or with
// a slot that cannot name a worker, is refused before it touches anything.
func TestRunWorkerRefusesBadConfig(t *testing.T) {
	_, err := job.RunWorker(t.Context(), job.WorkerConfig{Slot: "a"})
	if !errors.Is(err, job.ErrConfig) {
		t.Fatalf("empty config: %v, want ErrConfig", err)
	}
	_, err = job.RunWorker(t.Context(), job.WorkerConfig{
		Group: newHub().handle(), Slot: "a/b", Blobstore: memstore.New(), Dir: t.TempDir(),
		Source:    func(context.Context) (job.Source, error) { return &source{}, nil },
		Processor: summer{}, Sink: newLedger().sink(),
	})
	if !errors.Is(err, job.ErrConfig) {
		t.Fatalf("slot a/b: %v, want ErrConfig", err)
	}
	_, err = job.RunCoordinator(t.Context(), job.CoordinatorConfig{Group: newHub().handle()})
	if !errors.Is(err, job.ErrConfig) {
		t.Fatalf("coordinator without Storage: %v, want ErrConfig", err)
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestCoordinatorStopTakesAFinalCheckpoint: a closed Stop cuts a barrier
// at once and ends the job after it, before the Sources ended; a resume
// reads on from that checkpoint and ends exactly once.
func TestCoordinatorStopTakesAFinalCheckpoint(t *testing.T) {
	const n = 3000
	bucket := memstore.New()
	g := newHub()
	sinkOf := func(slot string) *job.BlobSink { return job.NewBlobSink(bucket, "out/"+slot+"/") }
	worker := func() *jobtest.Node {
		return jobtest.Go(t, func(ctx context.Context) (job.Result, error) {
			return job.RunWorker(ctx, job.WorkerConfig{
				Group: g.handle(), Slot: "a", Blobstore: bucket, Dir: t.TempDir(),
				Source:    func(context.Context) (job.Source, error) { return &source{n: n, batch: 10}, nil },
				Processor: summer{owner: "sum-a", pause: 2 * time.Millisecond},
				Sink:      sinkOf("a"), Owners: []string{"sum-a"}, State: smallState,
			})
		})
	}
	coordinator := func(stop <-chan struct{}, observe func(job.Event)) *jobtest.Node {
		disk := t.TempDir()
		interval := 50 * time.Millisecond
		if stop != nil {
			interval = time.Hour // the stop alone cuts the barrier
		}
		return jobtest.Go(t, func(ctx context.Context) (job.Result, error) {
			return job.RunCoordinator(ctx, job.CoordinatorConfig{
				Group: g.handle(), Storage: node(t, bucket, disk), Slots: []string{"a"},
				Sink:     func(slot string) (job.Sink, error) { return sinkOf(slot), nil },
				Interval: interval, Timeout: 5 * time.Second, Stop: stop, Observe: observe,
			})
		})
	}
	stop := make(chan struct{})
	var once sync.Once
	c := coordinator(stop, func(e job.Event) {
		if e.Kind == "start" {
			once.Do(func() { time.AfterFunc(200*time.Millisecond, func() { close(stop) }) })
		}
	})
	w := worker()
	res, err := c.Wait(t)
	if err != nil || res.Checkpoints != 1 {
		t.Fatalf("stopped coordinator: %v, %+v: want one final checkpoint", err, res)
	}
	wres, err := w.Wait(t)
	if err != nil || wres.Records == 0 || wres.Records >= n {
		t.Fatalf("stopped worker: %v, read %d of %d: want a stop mid-way", err, wres.Records, n)
	}
	c2 := coordinator(nil, nil)
	w2 := worker()
	if res2, err := c2.Wait(t); err != nil || res2.Restored != res.Last {
		t.Fatalf("resumed coordinator: %v, restored %q, want %q", err, res2.Restored, res.Last)
	}
	if _, err := w2.Wait(t); err != nil {
		t.Fatalf("resumed worker: %v", err)
	}
	checkExactlyOnce(t, jobtest.BlobOutput(t, sinkOf("a")), n)
}
