package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
	"github.com/tidemark-io/tidemark/cmd/tidemark/internal/demofault"
)

// goLauncher runs each worker as a goroutine (ServeWorker) in a new empty
// directory; Kill cancels it, which closes its connection as a dead
// process's would. storeFor gives the worker of a slot its store, once
// per launch.
type goLauncher struct {
	t        *testing.T
	storeFor func(slot, launch int) blobstore.Blobstore

	mu       sync.Mutex
	launches map[int]int
	cancel   map[int]context.CancelFunc
	wg       sync.WaitGroup
}

func (l *goLauncher) Launch(_ context.Context, slot int, addr string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c := l.cancel[slot]; c != nil {
		c()
	}
	l.launches[slot]++
	bs := l.storeFor(slot, l.launches[slot])
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel[slot] = cancel
	dir := filepath.Join(l.t.TempDir(), fmt.Sprint(slot))
	l.wg.Go(func() {
		_ = ServeWorker(ctx, WorkerConfig{Coordinator: addr, Slot: slot, Dir: dir,
			Open: func(context.Context, string) (blobstore.Blobstore, error) { return bs, nil }})
	})
	return nil
}

func (l *goLauncher) Kill(slot int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cancel[slot]()
	return nil
}

func (l *goLauncher) close() {
	l.mu.Lock()
	for _, c := range l.cancel {
		c()
	}
	l.mu.Unlock()
	l.wg.Wait()
}

// workersNode is a coordinator's configuration on bs with n workers run
// by a goLauncher.
func workersNode(t *testing.T, bs blobstore.Blobstore, n int, storeFor func(slot, launch int) blobstore.Blobstore) (WorkersConfig, *goLauncher) {
	t.Helper()
	if storeFor == nil {
		storeFor = func(int, int) blobstore.Blobstore { return bs }
	}
	l := &goLauncher{t: t, storeFor: storeFor, cancel: map[int]context.CancelFunc{}, launches: map[int]int{}}
	t.Cleanup(l.close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := node(t, bs)
	cfg.Records, cfg.Words, cfg.Batch, cfg.EveryRecords = 8000, 100, 250, 2000
	return WorkersConfig{Config: cfg, Workers: n, Listener: ln, Launcher: l, StoreURL: "test://", WorkerTimeout: 20 * time.Second, JoinTimeout: 20 * time.Second}, l
}

// faultyStore fails, once, the first part-record or state upload of its
// worker after `after` of them: fault decides what that write does.
type faultyStore struct {
	blobstore.Blobstore
	after int32
	n     atomic.Int32
	fault func(ctx context.Context) error
}

func (f *faultyStore) hit(ctx context.Context) error {
	if f.n.Add(1) == f.after+1 {
		return f.fault(ctx)
	}
	return nil
}

func (f *faultyStore) Put(ctx context.Context, key string, r io.Reader) error {
	if strings.HasPrefix(key, "pins/") {
		return f.Blobstore.Put(ctx, key, r)
	}
	if err := f.hit(ctx); err != nil {
		return err
	}
	return f.Blobstore.Put(ctx, key, r)
}

func (f *faultyStore) PutIfAbsent(ctx context.Context, key string, r io.Reader) (string, error) {
	if err := f.hit(ctx); err != nil {
		return "", err
	}
	return f.Blobstore.PutIfAbsent(ctx, key, r)
}

func mustRunWorkers(t *testing.T, ctx context.Context, wc WorkersConfig) WorkersResult {
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

// A worker that dies in the middle of saving its part (its process gone:
// the connection closes) makes the coordinator abandon that checkpoint
// and replace the worker; a worker that hangs there is replaced when its
// request times out, and when it wakes up later (a zombie) its part is
// never committed: the assignment names its successor. Both runs end
// exactly once, and the last checkpoint is assigned to the new worker.
func TestRunWorkersReplacesAWorkerLostInTheMiddleOfItsPart(t *testing.T) {
	for _, mode := range []string{"dies", "hangs"} {
		t.Run(mode, func(t *testing.T) {
			bs := fileStore(t)
			release := make(chan struct{})
			var zombie sync.WaitGroup
			var l *goLauncher
			storeFor := func(slot, launch int) blobstore.Blobstore {
				if slot != 1 || launch != 1 { // the first worker of slot 1 only
					return bs
				}
				// Its 31st upload, in its second or third part.
				f := &faultyStore{Blobstore: bs, after: 30}
				f.fault = func(ctx context.Context) error {
					if mode == "dies" {
						go func() { _ = l.Kill(slot) }()
						<-ctx.Done()
						return ctx.Err()
					}
					zombie.Add(1)
					defer zombie.Done()
					<-release // hang until after the run, then carry on
					return nil
				}
				return f
			}
			wc, gl := workersNode(t, bs, 2, storeFor)
			l = gl
			if mode == "hangs" {
				wc.WorkerTimeout = 2 * time.Second
			}
			var lost []WorkerEvent
			wc.OnWorker = func(e WorkerEvent) {
				if e.Event == "lost" {
					lost = append(lost, e)
				}
			}
			res := mustRunWorkers(t, t.Context(), wc)
			close(release)
			zombie.Wait()
			if res.Replaced != 1 || len(lost) != 1 || lost[0].Slot != 1 {
				t.Fatalf("replaced %d, lost %+v: want slot 1 lost and replaced once", res.Replaced, lost)
			}
			if mode == "hangs" && !strings.Contains(lost[0].Err.Error(), "no reply within") {
				t.Errorf("hung worker lost with %v, want a timeout", lost[0].Err)
			}
			ws := slices.Compact(slices.Sorted(maps.Values(res.Assignment)))
			if len(ws) != 2 || slices.Contains(ws, lost[0].Worker) {
				t.Fatalf("last assignment %v: want two workers, not the lost %s", res.Assignment, lost[0].Worker)
			}
			// Whatever the zombie wrote after it was replaced changes
			// nothing: resume the finished job with three workers, which
			// restore every owner from the store, and check again.
			wc2, _ := workersNode(t, bs, 3, nil)
			mustRunWorkers(t, t.Context(), wc2)
		})
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
	wc, _ := workersNode(t, bs, 2, nil)
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

// A run with three workers crashes mid-way; the job resumes with one,
// which restores all eight owners from the store (written by three other
// workers) and records the new assignment in its checkpoints.
func TestRunWorkersRescalesFromThreeWorkersToOne(t *testing.T) {
	bs := fileStore(t)
	wc, _ := workersNode(t, bs, 3, nil)
	_, err := RunWorkers(demofault.With(t.Context(), demofault.Faults{CrashAfter: 5000}), wc)
	if !errors.Is(err, ErrCrashed) {
		t.Fatalf("run with 3 workers: %v, want ErrCrashed", err)
	}
	wc, _ = workersNode(t, bs, 1, nil)
	var opened []WorkerEvent
	wc.OnWorker = func(e WorkerEvent) {
		if e.Event == "opened" {
			opened = append(opened, e)
		}
	}
	res := mustRunWorkers(t, t.Context(), wc)
	if res.RestoredID == "" || res.StartOffset == 0 || res.StartOffset >= 5000+uint64(wc.Batch) {
		t.Fatalf("resumed from %q at %d: want a checkpoint before the crash", res.RestoredID, res.StartOffset)
	}
	if len(opened) != 1 || len(opened[0].Downloaded) != DefaultOwners {
		t.Fatalf("opened %+v: want one worker restoring all %d owners from the store", opened, DefaultOwners)
	}
	var rec struct {
		Workers map[string]string `json:"workers"`
	}
	if err := json.Unmarshal([]byte(readKey(t, bs, "checkpoints/"+res.LastID+"/checkpoint.json")), &rec); err != nil {
		t.Fatal(err)
	}
	if len(rec.Workers) != DefaultOwners || !maps.Equal(rec.Workers, map[string]string(res.Assignment)) {
		t.Fatalf("checkpoint %s assigns %v, the run's assignment is %v", res.LastID, rec.Workers, res.Assignment)
	}
	for o, w := range rec.Workers {
		if w != opened[0].Worker {
			t.Fatalf("checkpoint %s assigns %s to %s, not to the one worker %s", res.LastID, o, w, opened[0].Worker)
		}
	}
}

// A worker busy with a request (here: opening the store, which hangs)
// stops at once when the coordinator closes the connection, instead of
// working on for nobody.
func TestServeWorkerStopsWorkWhenTheCoordinatorGoes(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cancelled := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- ServeWorker(t.Context(), WorkerConfig{Coordinator: ln.Addr().String(), Slot: 0, Dir: t.TempDir(),
			Open: func(ctx context.Context, _ string) (blobstore.Blobstore, error) {
				<-ctx.Done()
				close(cancelled)
				return nil, ctx.Err()
			}})
	}()
	conn, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	c := newWireConn(conn)
	var h wireHello
	if err := c.recv(&h); err != nil || h.Slot != 0 || h.Version != wireVersion {
		t.Fatalf("hello %+v, %v", h, err)
	}
	if err := c.send(wireRequest{Op: opOpen, Store: "test://", Owners: []string{"part-00"}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the worker is in Open now
	_ = c.close()
	select {
	case err := <-done:
		if !errors.Is(err, ErrCoordinatorGone) {
			t.Fatalf("ServeWorker: %v, want ErrCoordinatorGone", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the worker did not stop within 10s of its coordinator's going")
	}
	select {
	case <-cancelled:
	default:
		t.Fatal("the worker's request was not cancelled")
	}
}

// TestRunWorkersRefusesRemoteState: workers save their parts from local
// disk, so a run asking for remote state is refused before it writes.
func TestRunWorkersRefusesRemoteState(t *testing.T) {
	bs := fileStore(t)
	wc, _ := workersNode(t, bs, 2, nil)
	wc.RemoteState = RemoteStateAll
	_, err := RunWorkers(t.Context(), wc)
	if err == nil || !strings.Contains(err.Error(), "not supported with workers") {
		t.Fatalf("run workers with remote state: %v, want a refusal", err)
	}
	if keys := blobstoretest.ListKeys(t, bs, ""); len(keys) != 0 {
		t.Fatalf("the refused run wrote %q", keys)
	}
}
