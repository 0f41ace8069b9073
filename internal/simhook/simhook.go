// Package simhook holds the switches the deterministic simulation
// (integration/sim) turns on so that the code it runs replays a seed bit
// for bit. Production code reads a switch at the one place it matters;
// off (always, outside those runs) the code is unchanged.
package simhook

import "sync/atomic"

var noCompactions atomic.Bool

// SetNoCompactions keeps Pebble from compacting on its own while on: a
// compaction runs on Pebble's goroutine, racing the caller's for file
// numbers, which the object keys of a checkpoint show. It returns the
// function that puts the previous setting back.
func SetNoCompactions(on bool) (restore func()) {
	prev := noCompactions.Swap(on)
	return func() { noCompactions.Store(prev) }
}

// NoCompactions reports whether SetNoCompactions is on.
func NoCompactions() bool { return noCompactions.Load() }
