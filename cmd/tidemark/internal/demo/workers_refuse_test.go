package demo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/cmd/tidemark/internal/demofault"
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

// A second worker for a slot that has a live worker is told at once that
// it waits as the slot's standby (and the coordinator reports it), and
// takes over when the live worker is lost: the job ends exactly once.
func TestRunWorkersKeepsASecondWorkerOfASlotAsItsStandbyAndSaysSo(t *testing.T) {
	bs := fileStore(t)
	wc, _ := workersNode(t, bs, 1, nil)
	wc.Launcher = nil
	events := make(chan WorkerEvent, 64)
	wc.OnWorker = func(e WorkerEvent) { events <- e }
	addr := wc.Listener.Addr().String()
	type result struct {
		res WorkersResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		// 32 batches of 100 ms: the job runs for 3 s at least.
		res, err := RunWorkers(demofault.With(t.Context(), demofault.Faults{Slow: 100 * time.Millisecond}), wc)
		done <- result{res, err}
	}()
	serve := func(ctx context.Context, notify func(string)) chan error {
		ch := make(chan error, 1)
		go func() {
			ch <- ServeWorker(ctx, WorkerConfig{Coordinator: addr, Slot: 0, Dir: t.TempDir(), Notify: notify,
				Open: func(context.Context, string) (blobstore.Blobstore, error) { return bs, nil }})
		}()
		return ch
	}
	next := func(want string) WorkerEvent {
		t.Helper()
		timeout := time.After(10 * time.Second)
		for {
			select {
			case e := <-events:
				if e.Event == want {
					return e
				}
			case <-timeout:
				t.Fatalf("no %q event within 10s", want)
			}
		}
	}
	ctxA, killA := context.WithCancel(t.Context())
	defer killA()
	a := serve(ctxA, func(string) {})
	joined := next("joined")
	notes := make(chan string, 4)
	b := serve(t.Context(), func(m string) { notes <- m })
	want := fmt.Sprintf("slot 0 has a live worker (%s); waiting as its standby (it takes over if that worker is lost)", joined.Worker)
	select {
	case m := <-notes:
		if m != want {
			t.Fatalf("the second worker was told %q, want %q", m, want)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the second worker of slot 0 was told nothing within 3s")
	}
	standby := next("standby")
	if standby.Slot != 0 || standby.Live != joined.Worker || standby.Worker == joined.Worker {
		t.Fatalf("standby event %+v: want slot 0, live %s", standby, joined.Worker)
	}
	killA() // the live worker is lost: its standby takes over
	lost := next("lost")
	if lost.Worker != joined.Worker || lost.Standby != standby.Worker {
		t.Fatalf("lost event %+v: want %s lost, its standby %s taking over", lost, joined.Worker, standby.Worker)
	}
	if j := next("joined"); j.Worker != standby.Worker {
		t.Fatalf("joined %+v after the loss, want the standby %s", j, standby.Worker)
	}
	r := <-done
	if r.err != nil || !r.res.Check.OK() || r.res.Replaced != 1 {
		t.Fatalf("run: %v, replaced %d, check %s", r.err, r.res.Replaced, r.res.Check)
	}
	<-a
	if err := <-b; err != nil {
		t.Fatalf("the standby that took over: %v", err)
	}
}
