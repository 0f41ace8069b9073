package state

import (
	"bytes"
	"context"
	"errors"
)

// Compact compacts the owner's whole key space down to the bottom of its
// LSM (a manual Pebble compaction), and returns when it is done. Pebble
// compacts in the background by itself; Compact is for bulk loads in
// tests and benchmarks. Data loaded in key order lands in level 0 as
// tables that overlap nothing, where Pebble leaves it below its level-0
// thresholds; the next write across the key space then compacts all of
// it at once. Compacting after the load gives the state the shape a
// long-running job has: nearly everything in the lowest level.
func (o *Owner) Compact(ctx context.Context) error {
	if err := o.s.acquire(); err != nil {
		return o.errorf("compact", nil, err)
	}
	defer o.s.release()
	it, err := o.db.NewIterWithContext(ctx, nil)
	if err != nil {
		return o.errorf("compact", nil, err)
	}
	var first, last []byte
	if it.First() {
		first = bytes.Clone(it.Key())
		if it.Last() {
			last = bytes.Clone(it.Key())
		}
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return o.errorf("compact", nil, err)
	}
	if first == nil {
		return nil // empty
	}
	if err := o.db.Compact(ctx, first, append(last, 0), true); err != nil {
		return o.errorf("compact", nil, err)
	}
	return nil
}
