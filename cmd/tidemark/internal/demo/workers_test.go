package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
	"github.com/tidemark-io/tidemark/cmd/tidemark/internal/demofault"
	"github.com/tidemark-io/tidemark/integration/natstest"
)

// goLauncher runs each worker as a goroutine (ServeWorker) on its own
// NATS connection and a new empty directory, and starts a new one for a
// slot whose worker returned an error, as the CLI's launcher does for a
// process that died.
type goLauncher struct {
	t   *testing.T
	srv *natstest.Server
	bs  blobstore.Blobstore

	mu       sync.Mutex
	closed   bool
	launches map[int]int
	notes    []string
	wg       sync.WaitGroup
	ctx      context.Context
	cancel   context.CancelFunc
}

func (l *goLauncher) Launch(_ context.Context, slot int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.launches[slot]++
	js := l.srv.JetStream(l.t)
	dir := filepath.Join(l.t.TempDir(), fmt.Sprint(slot))
	l.wg.Go(func() {
		err := ServeWorker(l.ctx, WorkerConfig{JetStream: js, Slot: slot, Dir: dir,
			Open:   func(context.Context, string) (blobstore.Blobstore, error) { return l.bs, nil },
			Notify: func(s string) { l.note(fmt.Sprintf("worker %d: %s", slot, s)) }})
		if err != nil && l.ctx.Err() == nil {
			l.note(fmt.Sprintf("worker %d lost: %v", slot, err))
			_ = l.Launch(l.ctx, slot)
		}
	})
	return nil
}

func (l *goLauncher) note(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.notes = append(l.notes, s)
}

// said returns what the workers said and how often each slot launched.
func (l *goLauncher) said() (string, map[int]int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	launches := map[int]int{}
	for k, v := range l.launches {
		launches[k] = v
	}
	return strings.Join(l.notes, "\n"), launches
}

func (l *goLauncher) close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.cancel()
	l.wg.Wait()
}

// workersNode is a coordinator's configuration on bs with n workers run
// by a goLauncher, all on one embedded NATS server.
func workersNode(t *testing.T, bs blobstore.Blobstore, n int) (WorkersConfig, *goLauncher) {
	t.Helper()
	srv := natstest.StartEmbedded(t)
	ctx, cancel := context.WithCancel(context.Background())
	l := &goLauncher{t: t, srv: srv, bs: bs, launches: map[int]int{}, ctx: ctx, cancel: cancel}
	t.Cleanup(l.close)
	cfg := node(t, bs)
	cfg.Records, cfg.Words, cfg.Batch, cfg.Interval = 8000, 100, 250, 100*time.Millisecond
	return WorkersConfig{Config: cfg, Workers: n, JetStream: srv.JetStream(t), StoreURL: "test://", Launcher: l, WorkerTimeout: 20 * time.Second}, l
}

// slowly makes the workers take a while per batch, so that a run has
// several checkpoints and faults land mid-run.
func slowly(ctx context.Context, f demofault.Faults) context.Context {
	f.Slow = 20 * time.Millisecond
	return demofault.With(ctx, f)
}

func mustRunWorkers(t *testing.T, ctx context.Context, wc WorkersConfig) Result {
	t.Helper()
	res, err := RunWorkers(ctx, wc)
	if err != nil {
		t.Fatalf("run workers: %v (result %+v)", err, res)
	}
	if !res.Check.OK() || res.Check.Records != wc.Records {
		t.Fatalf("check: %s", res.Check)
	}
	return res
}

// Worker 0 dies mid-run (KillWorkerAfter); its slot gets a new worker on
// an empty directory, which restores its owners from the store, and the
// job ends exactly once. The kill happens once per store.
func TestRunWorkersReplacesAKilledWorker(t *testing.T) {
	bs := fileStore(t)
	wc, l := workersNode(t, bs, 2)
	mustRunWorkers(t, slowly(t.Context(), demofault.Faults{KillWorkerAfter: 1000}), wc)
	said, launches := l.said()
	if launches[0] != 2 || launches[1] != 1 || !strings.Contains(said, "worker 0 lost: ") || !strings.Contains(said, ErrCrashed.Error()) {
		t.Fatalf("launches %v, want worker 0 killed and started again:\n%s", launches, said)
	}
	if ok, err := bs.Exists(t.Context(), KilledWorkerMarkerPrefix+"1000"); err != nil || !ok {
		t.Fatalf("no kill marker (%v)", err)
	}
}

// A job with three workers crashes mid-way; it resumes with one, which
// restores all eight owners from the store, written by three others.
func TestRunWorkersRescalesFromThreeWorkersToOne(t *testing.T) {
	bs := fileStore(t)
	wc, _ := workersNode(t, bs, 3)
	_, err := RunWorkers(slowly(t.Context(), demofault.Faults{CrashAfter: 3000}), wc)
	if !errors.Is(err, ErrCrashed) {
		t.Fatalf("run with 3 workers: %v, want ErrCrashed", err)
	}
	wc, l := workersNode(t, bs, 1)
	res := mustRunWorkers(t, t.Context(), wc)
	if res.RestoredID == "" || res.StartOffset < 3000 || res.StartOffset >= wc.Records {
		t.Fatalf("resumed from %q at %d: want the checkpoint of the crash", res.RestoredID, res.StartOffset)
	}
	said, _ := l.said()
	if !strings.Contains(said, "worker 0: owners part-00,part-01,part-02,part-03,part-04,part-05,part-06,part-07, restored from the store, checkpoint "+res.RestoredID) {
		t.Fatalf("the one worker did not restore every owner:\n%s", said)
	}
	var rec struct {
		Workers map[string]string `json:"workers"`
	}
	if err := json.Unmarshal([]byte(readKey(t, bs, "checkpoints/"+res.LastID+"/checkpoint.json")), &rec); err != nil {
		t.Fatal(err)
	}
	for o, w := range rec.Workers {
		if !strings.HasPrefix(w, "slot0-") {
			t.Fatalf("checkpoint %s assigns %s to %s, not to the one worker of slot 0", res.LastID, o, w)
		}
	}
	if len(rec.Workers) != DefaultOwners {
		t.Fatalf("checkpoint %s assigns %v: want all %d owners", res.LastID, rec.Workers, DefaultOwners)
	}
}

// A worker whose slot is out of the job's range is refused, saying so.
func TestServeWorkerRefusesASlotOutOfRange(t *testing.T) {
	srv := natstest.StartEmbedded(t)
	if err := publishJob(t.Context(), srv.JetStream(t), jobSpec{Workers: 2}); err != nil {
		t.Fatal(err)
	}
	err := ServeWorker(t.Context(), WorkerConfig{JetStream: srv.JetStream(t), Slot: 2, Dir: t.TempDir()})
	if !errors.Is(err, ErrWorkerRefused) || !strings.Contains(err.Error(), "slot 2 is out of range: the job has 2 workers") {
		t.Fatalf("worker of slot 2 of 2: %v, want ErrWorkerRefused", err)
	}
}

// A job that ran in one process (owners counts and totals) is not resumed
// with workers, whose owners are the partitions: it refuses, saying so,
// without taking the writer role.
func TestRunWorkersRefusesAJobOfAnotherShape(t *testing.T) {
	bs := fileStore(t)
	cfg := node(t, bs)
	cfg.Records, cfg.Words = 2000, 50
	mustComplete(t, cfg)
	writer := readKey(t, bs, "_writer")
	wc, _ := workersNode(t, bs, 2)
	wc.Records, wc.Words = 2000, 50
	_, err := RunWorkers(t.Context(), wc)
	if !errors.Is(err, ErrJobMismatch) || !strings.Contains(err.Error(), "this job runs in one process") {
		t.Fatalf("run workers on a one-process job: %v, want ErrJobMismatch saying it runs in one process", err)
	}
	if after := readKey(t, bs, "_writer"); after != writer {
		t.Fatalf("the refused run took the writer role: _writer %s, was %s", after, writer)
	}
}

func readKey(t *testing.T, bs blobstore.Blobstore, key string) string {
	t.Helper()
	rc, err := bs.Get(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	b, err := readAllClose(rc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Workers in remote state: a job of two workers crashes mid-way and
// resumes with three, each opening the owners it gains from the tables
// in the store; it ends exactly once. A resume in local mode is refused
// before it takes the writer role.
func TestRunWorkersInRemoteStateRescale(t *testing.T) {
	bs := fileStore(t)
	wc, _ := workersNode(t, bs, 2)
	wc.RemoteState = RemoteStateAll
	_, err := RunWorkers(slowly(t.Context(), demofault.Faults{CrashAfter: 3000}), wc)
	if !errors.Is(err, ErrCrashed) {
		t.Fatalf("run with 2 workers: %v, want ErrCrashed", err)
	}
	if keys := blobstoretest.ListKeys(t, bs, "remote/"); len(keys) == 0 {
		t.Fatal("no table in the store under remote/: the workers' state was not in remote mode")
	}
	writer := readKey(t, bs, "_writer")
	local, _ := workersNode(t, bs, 3)
	if _, err := RunWorkers(t.Context(), local); !errors.Is(err, ErrStateMode) {
		t.Fatalf("resume in local mode: %v, want ErrStateMode", err)
	}
	if got := readKey(t, bs, "_writer"); got != writer {
		t.Fatalf("the refused run took the writer role: _writer %q, was %q", got, writer)
	}
	wc, _ = workersNode(t, bs, 3)
	wc.RemoteState = RemoteStateAll
	res := mustRunWorkers(t, t.Context(), wc)
	if res.RestoredID == "" || res.StartOffset < 3000 {
		t.Fatalf("resumed from %q at %d: want the checkpoint of the crash", res.RestoredID, res.StartOffset)
	}
}
