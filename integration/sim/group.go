package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/job"
)

// Group is the simulation's job.Group: an in-memory key-value bucket the
// coordinators and workers reach through the scheduler, as the store.
// Every call (lead, announce, join, report, watch) is a step that may
// fail, lose its response, stall or crash its caller; every message a
// watcher receives is a step of its own, which may be delayed, and a
// report may be lost on the way, as a network loses it.
//
// Delivery keeps the run a replay: a plan goes into a worker's buffered
// channel while the worker waits in the scheduler, and the coordinator's
// two channels (members, reports) are unbuffered and filled only while
// it waits on them, one message a step, so its select never sees two
// ready at once.
type Group struct {
	w *World

	mu      sync.Mutex
	watches int    // watches made, which number each
	led     uint64 // the greatest epoch that led
	rev     uint64 // the plan's revision, for compare-and-set
	plan    job.Plan
	members map[string]string
	plans   []*watch[job.Plan]
	mems    []*watch[map[string]string]
	reports []*watch[job.Report]
}

// groupHandle is one process's handle: its compare-and-set revision is
// its own, as with connector/jetstream's Group.
type groupHandle struct {
	g   *Group
	rev uint64
}

var _ job.Group = (*groupHandle)(nil)

func newGroup(w *World) *Group { return &Group{w: w, members: map[string]string{}} }

// Handle returns a new handle for one process.
func (g *Group) Handle() job.Group { return &groupHandle{g: g} }

// call passes one Group call of ctx's process through the scheduler and
// applies it (apply reports an error that refused it), as the store does.
func (g *Group) call(ctx context.Context, op, key string, apply func() error) error {
	c := Call{Op: "group:" + op, Key: key}
	f := g.w.sched.Enter(ctx, c)
	applies, err := g.w.store.failure(ctx, c, f)
	if f.Kind == Cut { // no body to cut: a plain failure
		applies, err = false, ErrInjected
	}
	applied := false
	if applies {
		if aerr := apply(); aerr != nil {
			if err == nil {
				err = aerr
			}
		} else {
			applied = true
		}
	}
	g.w.sched.Done(ctx, Event{Call: c, Fault: f, Applied: applied, Err: err})
	return err
}

func (h *groupHandle) Lead(ctx context.Context, epoch uint64) error {
	g := h.g
	return g.call(ctx, "lead", fmt.Sprint(epoch), func() error {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.led > epoch {
			return fmt.Errorf("sim: group: epoch %d leads, not %d: %w", g.led, epoch, checkpoint.ErrFenced)
		}
		g.led = epoch
		g.rev++
		g.plan, h.rev = job.Plan{Epoch: epoch}, g.rev
		g.sendPlanLocked()
		return nil
	})
}

func (h *groupHandle) Announce(ctx context.Context, p job.Plan) error {
	g := h.g
	mine := h.rev
	var next uint64
	err := g.call(ctx, "announce", planKey(p), func() error {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.rev != mine {
			return fmt.Errorf("sim: group: plan revision %d, not %d: another coordinator led: %w", g.rev, mine, checkpoint.ErrFenced)
		}
		g.rev++
		g.plan, next = clonePlan(p), g.rev
		g.sendPlanLocked()
		return nil
	})
	if err == nil {
		h.rev = next // a lost response leaves the handle behind: fenced
	}
	return err
}

func planKey(p job.Plan) string {
	k := fmt.Sprintf("e%d-g%d", p.Epoch, p.Gen)
	switch {
	case p.Stop:
		k += "-stop"
	case p.Barrier != "":
		k += "-" + p.Barrier
	}
	return k
}

func clonePlan(p job.Plan) job.Plan {
	b, _ := json.Marshal(p)
	var c job.Plan
	_ = json.Unmarshal(b, &c)
	return c
}

// live drops the watches whose watcher is gone.
func live[T any](ws []*watch[T]) []*watch[T] {
	return slices.DeleteFunc(ws, func(wt *watch[T]) bool { return wt.ctx.Err() != nil })
}

func (g *Group) sendPlanLocked() {
	g.plans = live(g.plans)
	for _, wt := range g.plans {
		wt.push(clonePlan(g.plan), planKey(g.plan))
	}
}

func (h *groupHandle) Members(ctx context.Context) (<-chan map[string]string, error) {
	g := h.g
	var ch <-chan map[string]string
	err := g.call(ctx, "watch-members", "", func() error {
		g.mu.Lock()
		defer g.mu.Unlock()
		wt := newWatch[map[string]string](g, ctx, "members", 0, false)
		wt.push(maps.Clone(g.members), "")
		g.mems = append(g.mems, wt)
		ch = wt.ch
		return nil
	})
	return ch, err
}

func (h *groupHandle) Reports(ctx context.Context) (<-chan job.Report, error) {
	g := h.g
	var ch <-chan job.Report
	err := g.call(ctx, "watch-reports", "", func() error {
		g.mu.Lock()
		defer g.mu.Unlock()
		wt := newWatch[job.Report](g, ctx, "report", 0, true)
		g.reports = append(g.reports, wt)
		ch = wt.ch
		return nil
	})
	return ch, err
}

func (h *groupHandle) Join(ctx context.Context, slot, worker string) (<-chan job.Plan, error) {
	g := h.g
	var ch <-chan job.Plan
	err := g.call(ctx, "join", slot+"="+worker, func() error {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.members[slot] = worker
		g.mems = live(g.mems)
		for _, wt := range g.mems {
			wt.push(maps.Clone(g.members), slot+"="+worker)
		}
		wt := newWatch[job.Plan](g, ctx, "plan", 1024, false)
		wt.push(clonePlan(g.plan), planKey(g.plan))
		g.plans = append(g.plans, wt)
		ch = wt.ch
		return nil
	})
	return ch, err
}

func (h *groupHandle) Report(ctx context.Context, r job.Report) error {
	g := h.g
	return g.call(ctx, "report", r.Slot+"-"+r.Checkpoint, func() error {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.reports = live(g.reports)
		for _, wt := range g.reports {
			wt.push(r, r.Slot+"-"+r.Checkpoint)
		}
		return nil
	})
}

// watch delivers one watcher's messages in order, each as a step of the
// scheduler made in the watcher's process. Its number and each message's
// keep two deliveries to one process apart in the scheduler's order.
type watch[T any] struct {
	w     *World
	ctx   context.Context
	proc  string
	kind  string
	id    int
	lossy bool // a message may be lost (reports), else only delayed
	ch    chan T

	mu    sync.Mutex
	queue []msg[T]
	sent  int
	kick  chan struct{}
}

type msg[T any] struct {
	v    T
	desc string
}

// newWatch starts a watch; call it with g.mu held.
func newWatch[T any](g *Group, ctx context.Context, kind string, buf int, lossy bool) *watch[T] {
	w := g.w
	g.watches++
	wt := &watch[T]{w: w, ctx: ctx, proc: ProcName(ctx), kind: kind, lossy: lossy, id: g.watches,
		ch: make(chan T, buf), kick: make(chan struct{}, 1)}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer close(wt.ch)
		wt.run()
	}()
	return wt
}

func (wt *watch[T]) push(v T, desc string) {
	wt.mu.Lock()
	wt.sent++
	wt.queue = append(wt.queue, msg[T]{v: v, desc: fmt.Sprintf("%d.%d %s", wt.id, wt.sent, desc)})
	wt.mu.Unlock()
	select {
	case wt.kick <- struct{}{}:
	default:
	}
}

// pollEvery is how often a message for a busy coordinator is offered
// again.
const pollEvery = 7 * time.Millisecond

func (wt *watch[T]) run() {
	ctx := wt.ctx
	for {
		wt.mu.Lock()
		if len(wt.queue) == 0 {
			wt.mu.Unlock()
			select {
			case <-wt.kick:
				continue
			case <-ctx.Done():
				return
			}
		}
		m := wt.queue[0]
		wt.queue = slices.Delete(wt.queue, 0, 1)
		wt.mu.Unlock()

		c := Call{Op: "group:recv-" + wt.kind, Key: m.desc}
		f := wt.w.sched.Enter(ctx, c)
		deliver := true
		switch f.Kind {
		case Crash:
			wt.w.sched.Done(ctx, Event{Call: c, Fault: f, Err: ErrCrashed})
			return
		case Stall:
			t := time.NewTimer(f.Stall)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			}
		case Lost, FailBefore, SlowDown, Cut:
			deliver = !wt.lossy
		}
		if ctx.Err() != nil {
			return
		}
		var err error
		if !deliver {
			err = fmt.Errorf("sim: group: %s lost on the way", wt.kind)
		}
		wt.w.sched.Done(ctx, Event{Call: c, Fault: f, Applied: deliver, Err: err})
		if deliver && !wt.send(m.v) {
			return
		}
	}
}

// send hands v to the watcher: at once into a buffered channel, else
// when the watcher waits on it, polling.
func (wt *watch[T]) send(v T) bool {
	if cap(wt.ch) > 0 {
		select {
		case wt.ch <- v:
			return true
		case <-wt.ctx.Done():
			return false
		}
	}
	for {
		select {
		case wt.ch <- v:
			return true
		case <-wt.ctx.Done():
			return false
		default:
		}
		t := time.NewTimer(pollEvery)
		select {
		case <-t.C:
		case <-wt.ctx.Done():
			t.Stop()
			return false
		}
	}
}
