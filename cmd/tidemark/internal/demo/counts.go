package demo

import (
	"encoding/binary"
	"fmt"
	"maps"
	"slices"

	"github.com/tidemark-io/tidemark/state"
)

// State owners of the word-count job: one Pebble database each (see
// package state). counts holds word → count; totals holds the number of
// records folded into counts, a second owner so that every checkpoint and
// restore carries more than one state directory.
const (
	OwnerCounts = "counts"
	OwnerTotals = "totals"
)

// totalsKey is the only key of the totals owner.
var totalsKey = []byte("records")

// counts is the job's keyed state: the word counts and the record total,
// in a state.Store.
type counts struct {
	st            *state.Store
	words, totals *state.Owner
}

// openCounts opens both owners of st.
func openCounts(st *state.Store) (*counts, error) {
	w, err := st.Owner(OwnerCounts)
	if err != nil {
		return nil, err
	}
	t, err := st.Owner(OwnerTotals)
	if err != nil {
		return nil, err
	}
	return &counts{st: st, words: w, totals: t}, nil
}

func u64(b []byte) uint64 {
	if len(b) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

func be(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }

// add folds one batch into the state: delta per word and n records. Each
// owner's update is one atomic Pebble batch; a crash between the two is
// harmless because the live state is rebuilt from a checkpoint after any
// crash, and checkpoints are taken between batches.
func (c *counts) add(delta map[string]uint64, n uint64) error {
	err := c.words.Apply(func(b *state.Batch) error {
		for _, w := range slices.Sorted(maps.Keys(delta)) {
			cur, _, err := c.words.Get([]byte(w))
			if err != nil {
				return err
			}
			if err := b.Set([]byte(w), be(u64(cur)+delta[w])); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("demo: state: add counts: %w", err)
	}
	total, err := c.total()
	if err != nil {
		return err
	}
	if err := c.totals.Set(totalsKey, be(total+n)); err != nil {
		return fmt.Errorf("demo: state: add total: %w", err)
	}
	return nil
}

// total returns the number of records folded into the state.
func (c *counts) total() (uint64, error) {
	v, _, err := c.totals.Get(totalsKey)
	if err != nil {
		return 0, fmt.Errorf("demo: state: total: %w", err)
	}
	return u64(v), nil
}

// all returns every word count.
func (c *counts) all() (map[string]uint64, error) {
	out := map[string]uint64{}
	for kv, err := range c.words.Scan(nil) {
		if err != nil {
			return nil, fmt.Errorf("demo: state: scan: %w", err)
		}
		out[string(kv.Key)] = u64(kv.Value)
	}
	return out, nil
}
