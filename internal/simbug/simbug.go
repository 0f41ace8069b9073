// Package simbug holds the deliberate bugs the deterministic simulation
// (integration/sim) must catch, each behind a switch only its tests set.
// Production code reads the switch at the one place the bug would be;
// with Active empty (always, outside those tests) the code is unchanged.
package simbug

// Bug names a deliberate bug.
type Bug string

// The bugs, as docs/simulation.md tables them.
const (
	// SkipWriterCheck moves pointers without checking the writer role:
	// no _writer check, no refusal of a pointer carrying a greater epoch.
	SkipWriterCheck Bug = "skip-writer-check"
	// NoGrace lets GC delete leftovers younger than the grace period.
	NoGrace Bug = "gc-without-grace"
	// PointerBeforeRecord moves the pointers before writing the record.
	PointerBeforeRecord Bug = "pointer-before-record"
	// ForgetPin restores without pinning the checkpoint.
	ForgetPin Bug = "forget-pin"
	// LostAsFailure takes an indeterminate sink error for a failure:
	// recovery abandons a prepared checkpoint whose commit may have
	// landed, and the coordinator aborts a prepared transaction.
	LostAsFailure Bug = "lost-response-as-failure"
	// TrustUnmarked restores over a local state directory with the
	// recorded sizes without reading its digests when it has no boot
	// marker, taking it for one fsynced when written.
	TrustUnmarked Bug = "trust-unmarked-dir"
)

// All lists every bug.
var All = []Bug{SkipWriterCheck, NoGrace, PointerBeforeRecord, ForgetPin, LostAsFailure, TrustUnmarked}

// Active is the bug switched on; tests set it before a run and clear it
// after. Empty means none.
var Active Bug

// On reports whether bug b is switched on.
func On(b Bug) bool { return Active == b }
