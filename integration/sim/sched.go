package sim

import (
	"cmp"
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing/synctest"
	"time"
)

// Rates are the probabilities of each fault, per store call.
type Rates struct {
	FailBefore, Lost, Stall, SlowDown, Cut float64
	// Crash is the chance that the calling writer dies during a call.
	Crash float64
	// Freeze is the chance that the calling writer freezes (a zombie to
	// be) for a while, during which the world replaces it.
	Freeze float64
	// Stale is the chance that a List is stale, by up to StaleBound.
	Stale      float64
	StaleBound time.Duration
	// HookHalt and HookFail are the chances a Coordinator step halts (a
	// crash in the two-phase window) or fails.
	HookHalt, HookFail float64
}

// DefaultRates are the rates of the standard runs: about one call in
// twenty is faulted.
var DefaultRates = Rates{
	FailBefore: 0.01, Lost: 0.008, Stall: 0.003, SlowDown: 0.01, Cut: 0.005,
	Crash: 0.002, Freeze: 0.002, Stale: 0.3, StaleBound: 5 * time.Second,
	HookHalt: 0.02, HookFail: 0.01,
}

// waiter is a call blocked in the gate.
type waiter struct {
	call   Call
	ch     chan Fault
	issued int // the step when the call arrived
}

// Stats count what the scheduler let through.
type Stats struct {
	Steps  int            // scheduling steps: store calls, their resumptions after a stall, Coordinator hooks, Group calls and deliveries
	Calls  int            // store calls released
	Ops    map[string]int // by operation
	Faults map[string]int // by fault kind (and crash, freeze, hook-halt, hook-fail)
}

func (s *Stats) add(o Stats) {
	s.Calls += o.Calls
	s.Steps += o.Steps
	if s.Ops == nil {
		s.Ops, s.Faults = map[string]int{}, map[string]int{}
	}
	for k, v := range o.Ops {
		s.Ops[k] += v
	}
	for k, v := range o.Faults {
		s.Faults[k] += v
	}
}

// Add adds o's counts to s.
func (s *Stats) Add(o Stats) { s.add(o) }

// Line prints the counts on one line of name=value fields (make dst sums
// them across processes).
func (s Stats) Line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "calls=%d steps=%d", s.Calls, s.Steps)
	keys := make([]string, 0, len(s.Faults))
	for k := range s.Faults {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, " fault:%s=%d", k, s.Faults[k])
	}
	return b.String()
}

// String prints the counts sorted by name.
func (s Stats) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "store calls %d (scheduling steps %d)\n", s.Calls, s.Steps)
	for _, m := range []struct {
		name string
		m    map[string]int
	}{{"op", s.Ops}, {"fault", s.Faults}} {
		keys := make([]string, 0, len(m.m))
		for k := range m.m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "  %-6s %-16s %d\n", m.name, k, m.m[k])
		}
	}
	return b.String()
}

// Scheduler is the Gate of a simulation: every store call blocks in it
// until the scheduler, running in the synctest bubble, picks it, with a
// seeded random choice among the calls waiting. Between two picks it waits
// for every goroutine of the bubble to block, so one logical step runs at
// a time and a seed replays the same steps.
type Scheduler struct {
	rng   *rand.Rand
	rates Rates
	start time.Time

	mu       sync.Mutex
	pending  []*waiter
	dead     map[string]bool
	frozen   map[string]time.Time // proc → thaw time
	draining bool
	silent   bool // the trace takes no line (the processes stopping)
	arrival  chan struct{}
	step     int
	stats    Stats

	// OnCrash and OnFreeze tell the world of a decision (set before Run).
	OnCrash  func(proc string)
	OnFreeze func(proc string, d time.Duration)
	// OnEvent hears of every call's outcome, in order.
	OnEvent func(step int, ev Event)
	// Faulty reports whether proc may be faulted, crashed or frozen.
	Faulty func(proc string) bool
	// Freezes reports whether proc may freeze (the writers: a zombie is
	// a writer that wakes after its replacement started).
	Freezes func(proc string) bool

	trace []string // the last traceKeep lines
	hash  uint64   // of every line
	lines int
	Full  []string // every line, when KeepTrace
	Keep  bool
}

const traceKeep = 400

// NewScheduler returns a scheduler drawing from seed. Call it inside the
// synctest bubble.
func NewScheduler(seed uint64, rates Rates) *Scheduler {
	return &Scheduler{
		rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), rates: rates, start: time.Now(),
		dead: map[string]bool{}, frozen: map[string]time.Time{},
		arrival: make(chan struct{}, 1),
		stats:   Stats{Ops: map[string]int{}, Faults: map[string]int{}},
	}
}

// Stats returns the counts so far.
func (s *Scheduler) Stats() Stats { return s.stats }

// Step returns the number of calls released so far.
func (s *Scheduler) Step() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.step
}

// Enter implements Gate.
func (s *Scheduler) Enter(ctx context.Context, c Call) Fault {
	c.Proc = ProcName(ctx)
	s.mu.Lock()
	if s.draining {
		s.mu.Unlock()
		return Fault{Kind: Crash}
	}
	w := &waiter{call: c, ch: make(chan Fault, 1), issued: sentStep(ctx, s.step)}
	s.pending = append(s.pending, w)
	s.mu.Unlock()
	select {
	case s.arrival <- struct{}{}:
	default:
	}
	return <-w.ch
}

// Done implements Gate.
func (s *Scheduler) Done(ctx context.Context, ev Event) {
	ev.Proc = ProcName(ctx)
	res := "ok"
	if ev.Err != nil {
		res = "err: " + shortErr(ev.Err)
	}
	if ev.Applied {
		res += " (applied " + ev.ETag + ")"
	}
	s.mu.Lock()
	step := s.step
	s.mu.Unlock()
	// A call the end of a phase failed (drain) had no step: such calls
	// fail together, in the Go scheduler's order, which a trace would show.
	if !ungated(ctx) && (ev.Fault.Step != 0 || ev.Fault.Kind != Crash) {
		s.line(fmt.Sprintf("%7d %10s %-12s   → %s %s", step, s.elapsed(), ev.Proc, ev.Op, res))
	}
	if s.OnEvent != nil {
		s.OnEvent(step, ev)
	}
}

func shortErr(err error) string {
	m := err.Error()
	if len(m) > 120 {
		m = m[:120] + "…"
	}
	return m
}

func (s *Scheduler) elapsed() string {
	return time.Since(s.start).Truncate(time.Millisecond).String()
}

// Note adds a line to the trace (the world's own steps).
func (s *Scheduler) Note(proc, format string, args ...any) {
	s.mu.Lock()
	step := s.step
	s.mu.Unlock()
	s.line(fmt.Sprintf("%7d %10s %-12s * %s", step, s.elapsed(), proc, fmt.Sprintf(format, args...)))
}

func (s *Scheduler) line(l string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.silent {
		return
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%d|%s", s.hash, l)
	s.hash = h.Sum64()
	s.lines++
	if s.Keep {
		s.Full = append(s.Full, l)
	}
	s.trace = append(s.trace, l)
	if len(s.trace) > traceKeep {
		s.trace = s.trace[len(s.trace)-traceKeep:]
	}
}

// Trace returns the last lines of the trace.
func (s *Scheduler) Trace() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.trace)
}

// Fingerprint is a hash of the whole trace: equal for two runs of a seed.
func (s *Scheduler) Fingerprint() (hash uint64, lines int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hash, s.lines
}

// Kill marks proc dead: its calls fail from now on.
func (s *Scheduler) Kill(proc string) {
	s.mu.Lock()
	s.dead[proc] = true
	s.mu.Unlock()
}

// Run releases calls until stop reports true while no call waits, or
// until maxSteps calls were released; then it drains: every waiting and
// later call fails as if its process had crashed. idle is closed by the
// world when it has nothing left running.
func (s *Scheduler) Run(maxSteps int, stop func() bool) {
	idle := 0
	for {
		synctest.Wait()
		if s.Step() >= maxSteps {
			s.drain()
			return
		}
		w, wait := s.pick()
		if w == nil {
			if stop() {
				return
			}
			if wait > 0 {
				// Only frozen processes' calls wait: until one thaws, or
				// a call of another arrives (a frozen writer's
				// replacement must run while it sleeps).
				t := time.NewTimer(wait)
				select {
				case <-s.arrival:
				case <-t.C:
				}
				t.Stop()
				continue
			}
			// Nothing waits: let time pass until a timer wakes someone.
			// An hour with no call at all ends the run (a stuck world).
			t := time.NewTimer(time.Minute)
			select {
			case <-s.arrival:
				idle = 0
			case <-t.C:
				if idle++; idle > 60 {
					s.Note("sched", "an hour without a call: ending the phase")
					s.drain()
					return
				}
			}
			t.Stop()
			continue
		}
		idle = 0
		f := s.decide(w.call)
		s.mu.Lock()
		s.step++
		f.Step, f.Issued = s.step, w.issued
		s.mu.Unlock()
		s.stats.Steps++
		if !strings.HasPrefix(w.call.Op, "hook:") && !strings.HasPrefix(w.call.Op, "group:") && w.call.Op != "stalled" {
			s.stats.Calls++
		}
		s.stats.Ops[w.call.Op]++
		if f.Kind != OK {
			s.stats.Faults[f.Kind.String()]++
		}
		desc := f.Kind.String()
		if f.StaleBy > 0 {
			desc += fmt.Sprintf(" stale-by=%s", f.StaleBy)
		}
		s.line(fmt.Sprintf("%7d %10s %-12s %s %q size=%d [%s]", f.Step, s.elapsed(), w.call.Proc, w.call.Op, w.call.Key, w.call.Size, desc))
		// A call takes a little time; others may run meanwhile. Drawn
		// before the release: the released goroutine may wake others
		// that use the world's randomness. The nanoseconds keep two
		// timers from firing at the same instant (two goroutines would
		// then run at once).
		lat := time.Millisecond + time.Duration(s.rng.Int64N(int64(19*time.Millisecond)))
		w.ch <- f
		time.Sleep(lat)
	}
}

// Drain fails every waiting and later call (the end of a run).
func (s *Scheduler) drain() {
	s.mu.Lock()
	s.draining = true
	p := s.pending
	s.pending = nil
	s.mu.Unlock()
	for _, w := range p {
		w.ch <- Fault{Kind: Crash}
	}
}

// Resume lets calls be scheduled again after a drain (the final phase).
func (s *Scheduler) Resume() {
	s.mu.Lock()
	s.draining = false
	s.mu.Unlock()
	s.quiet(false)
}

// quiet stops (or resumes) adding lines to the trace.
func (s *Scheduler) quiet(on bool) {
	s.mu.Lock()
	s.silent = on
	s.mu.Unlock()
}

// pick removes and returns the call to release next: a dead process's
// first (they fail at once), else a seeded choice among the calls of
// processes not frozen. With none, wait is how long until one thaws.
func (s *Scheduler) pick() (*waiter, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pending) == 0 {
		return nil, 0
	}
	// The order calls arrived in is the Go scheduler's: sort them.
	slices.SortStableFunc(s.pending, func(a, b *waiter) int {
		return cmp.Or(cmp.Compare(a.call.Proc, b.call.Proc), cmp.Compare(a.call.Op, b.call.Op),
			cmp.Compare(a.call.Key, b.call.Key), cmp.Compare(a.call.Size, b.call.Size))
	})
	now := time.Now()
	var ready []int
	var thaw time.Time
	for i, w := range s.pending {
		if s.dead[w.call.Proc] {
			ready = []int{i}
			break
		}
		if t, ok := s.frozen[w.call.Proc]; ok {
			if now.Before(t) {
				if thaw.IsZero() || t.Before(thaw) {
					thaw = t
				}
				continue
			}
			delete(s.frozen, w.call.Proc)
			s.noteLocked(w.call.Proc, "wakes up")
		}
		ready = append(ready, i)
	}
	if len(ready) == 0 {
		return nil, thaw.Sub(now)
	}
	i := ready[0]
	if !s.dead[s.pending[i].call.Proc] {
		i = ready[s.rng.IntN(len(ready))]
	}
	w := s.pending[i]
	s.pending = slices.Delete(s.pending, i, i+1)
	return w, 0
}

func (s *Scheduler) noteLocked(proc, msg string) {
	s.mu.Unlock()
	s.Note(proc, "%s", msg)
	s.mu.Lock()
}

// decide draws the fault of call c.
func (s *Scheduler) decide(c Call) Fault {
	s.mu.Lock()
	dead := s.dead[c.Proc]
	s.mu.Unlock()
	if dead {
		return Fault{Kind: Crash}
	}
	r := s.rates
	if s.Faulty != nil && !s.Faulty(c.Proc) {
		return Fault{}
	}
	if strings.HasPrefix(c.Op, "hook:") {
		switch x := s.rng.Float64(); {
		case x < r.HookHalt:
			s.stats.Faults["hook-halt"]++
			s.crash(c.Proc)
			return Fault{Kind: Crash}
		case x < r.HookHalt+r.HookFail:
			s.stats.Faults["hook-fail"]++
			return Fault{Kind: FailBefore}
		}
		return Fault{}
	}
	if c.Op == "stalled" {
		return Fault{}
	}
	x := s.rng.Float64()
	if x < r.Crash {
		s.crash(c.Proc)
		return Fault{Kind: Crash, Applied: s.rng.IntN(2) == 0 && c.Size < 1<<10}
	}
	x -= r.Crash
	if x < r.Freeze && (s.Freezes == nil || s.Freezes(c.Proc)) {
		d := time.Duration(10+s.rng.IntN(300)) * time.Second
		s.mu.Lock()
		s.frozen[c.Proc] = time.Now().Add(d)
		s.mu.Unlock()
		s.stats.Faults["freeze"]++
		s.Note(c.Proc, "freezes for %s", d)
		if s.OnFreeze != nil {
			s.OnFreeze(c.Proc, d)
		}
		// The call itself goes through once the process wakes.
		return Fault{Kind: Stall, Applied: true, Stall: d, Freeze: true}
	}
	x -= r.Freeze
	read := c.Op == "get" || c.Op == "get-range" || c.Op == "list" || c.Op == "stat"
	for _, k := range []struct {
		kind Kind
		p    float64
	}{{FailBefore, r.FailBefore}, {Lost, r.Lost}, {Stall, r.Stall}, {SlowDown, r.SlowDown}, {Cut, r.Cut}} {
		if k.kind == Cut && c.Op != "get" && c.Op != "get-range" && c.Op != "list" {
			continue
		}
		if x < k.p {
			f := Fault{Kind: k.kind}
			if k.kind == Stall {
				f.Stall = time.Duration(1+s.rng.IntN(60)) * time.Second
				f.Applied = !read && s.rng.IntN(2) == 0
			}
			return f
		}
		x -= k.p
	}
	if c.Op == "list" && s.rng.Float64() < r.Stale && r.StaleBound > 0 {
		return Fault{StaleBy: time.Duration(s.rng.Int64N(int64(r.StaleBound)))}
	}
	return Fault{}
}

// crash kills proc and tells the world.
func (s *Scheduler) crash(proc string) {
	s.Kill(proc)
	s.stats.Faults["crash"]++
	s.Note(proc, "crashes")
	if s.OnCrash != nil {
		s.OnCrash(proc)
	}
}

// Hook asks the scheduler what a Coordinator step does: continue, fail
// (FailBefore) or halt (Crash; the process is dead).
func (s *Scheduler) Hook(proc, step, id string) Kind {
	return s.Enter(WithProc(context.Background(), proc), Call{Op: "hook:" + step, Key: id}).Kind
}
