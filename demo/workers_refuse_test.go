package demo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/tidemark-io/tidemark/blobstore"
)

// A worker that connects with a slot out of range is refused with a
// message saying so, which its ServeWorker returns; the coordinator
// reports it and goes on waiting for the worker of its slot, with which
// the job ends exactly once.
func TestRunWorkersRefusesAWorkerWithASlotOutOfRange(t *testing.T) {
	bs := fileStore(t)
	wc, _ := workersNode(t, bs, 1, nil)
	wc.Launcher = nil // the workers are started by hand, as with --worker-listen
	var mu sync.Mutex
	var refused []WorkerEvent
	wc.OnWorker = func(e WorkerEvent) {
		if e.Event == "refused" {
			mu.Lock()
			refused = append(refused, e)
			mu.Unlock()
		}
	}
	addr := wc.Listener.Addr().String()
	type result struct {
		res WorkersResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := RunWorkers(t.Context(), wc)
		done <- result{res, err}
	}()
	serve := func(slot int) error {
		return ServeWorker(t.Context(), WorkerConfig{Coordinator: addr, Slot: slot, Dir: t.TempDir(),
			Open: func(context.Context, string) (blobstore.Blobstore, error) { return bs, nil }})
	}
	want := "slot 3 out of range: this job has slots 0..0"
	if err := serve(3); !errors.Is(err, ErrWorkerRefused) || !strings.Contains(err.Error(), want) {
		t.Fatalf("worker of slot 3: %v, want ErrWorkerRefused saying %q", err, want)
	}
	if err := serve(0); err != nil {
		t.Fatalf("worker of slot 0: %v", err)
	}
	r := <-done
	if r.err != nil || !r.res.Check.OK() {
		t.Fatalf("run: %v, check %s", r.err, r.res.Check)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(refused) != 1 || refused[0].Slot != 3 || fmt.Sprint(refused[0].Err) != want {
		t.Fatalf("refused events %+v, want one of slot 3 saying %q", refused, want)
	}
}
