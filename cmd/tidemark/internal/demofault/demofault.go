// Package demofault carries the demo job's fault injection — slowing it
// down, crashing it at a record, killing a worker — from the
// CLI and the tests to demo.Run, so that these seams stay out of the
// demo's public Config. Only the CLI (cmd/tidemark) can import it.
package demofault

import (
	"context"
	"time"
)

// Faults are the faults of one run. The zero value injects none.
type Faults struct {
	// Slow sleeps this long after every batch, so that a run lasts long
	// enough to be killed from outside.
	Slow time.Duration
	// CrashAfter, if not zero, crashes the run when the source offset
	// reaches it (with workers: at the first checkpoint past it), once per store (see demo.CrashMarkerPrefix). The crash
	// calls Crash (the CLI passes one that exits the process), or, when
	// Crash is nil, stops the run as a crash would and returns
	// demo.ErrCrashed.
	CrashAfter uint64
	// Crash is the crash of CrashAfter.
	Crash func()
	// KillWorkerAfter, if not zero, makes worker 0 of demo.RunWorkers
	// kill itself once it read that many records, once per store (see
	// demo.KilledWorkerMarkerPrefix): its launcher then replaces it.
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
