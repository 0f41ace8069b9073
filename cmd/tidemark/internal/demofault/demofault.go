// Package demofault carries the demo job's fault injection — slowing it
// down, crashing it at a record, halting it at a protocol step — from the
// CLI and the tests to demo.Run, so that these seams stay out of the
// demo's public Config. Only the CLI (cmd/tidemark) can import it.
package demofault

import (
	"context"
	"time"

	"github.com/tidemark-io/tidemark/checkpoint"
)

// Faults are the faults of one run. The zero value injects none.
type Faults struct {
	// Slow sleeps this long after every batch, so that a run lasts long
	// enough to be killed from outside.
	Slow time.Duration
	// CrashAfter, if not zero, crashes the run when the source offset
	// reaches it, once per store (see demo.CrashMarkerPrefix). The crash
	// calls Crash (the CLI passes one that exits the process), or, when
	// Crash is nil, stops the run as a crash would and returns
	// demo.ErrCrashed.
	CrashAfter uint64
	// Crash is the crash of CrashAfter.
	Crash func()
	// Hook is passed to the Coordinator, to crash at each protocol step;
	// checkpoint.HookHalt ends the run with demo.ErrCrashed.
	Hook func(step checkpoint.Step, id string) checkpoint.HookAction
	// KillWorkerAfter, if not zero, makes demo.RunWorkers kill worker 0
	// (through its Launcher, which must be a demo.Killer) when the source
	// offset reaches it, once per store (see
	// demo.KilledWorkerMarkerPrefix): the coordinator then replaces it.
	KillWorkerAfter uint64
}

type key struct{}

// With returns ctx carrying f for demo.Run.
func With(ctx context.Context, f Faults) context.Context { return context.WithValue(ctx, key{}, f) }

// From returns the faults ctx carries, or none.
func From(ctx context.Context) Faults {
	f, _ := ctx.Value(key{}).(Faults)
	return f
}
