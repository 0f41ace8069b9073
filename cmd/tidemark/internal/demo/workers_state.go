package demo

import (
	"fmt"
	"hash/fnv"
	"maps"
	"slices"

	"github.com/tidemark-io/tidemark/state"
)

// DefaultOwners is the number of state owners (partitions of the word
// space) of the job with workers. It is fixed for the life of a job: the
// owners are what moves between workers when the job is rescaled.
const DefaultOwners = 8

// ownerIDs returns the owners of a job with n partitions: part-00, part-01, …
func ownerIDs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("part-%02d", i)
	}
	return out
}

// partitionOf returns the index of the owner of word among n.
func partitionOf(word string, n int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(word))
	return int(h.Sum32() % uint32(n))
}

// Keys of a partition's database: one per word, and the number of
// records folded into the partition.
var (
	partWordPrefix = []byte("w/")
	partTotalKey   = []byte("t")
)

// partition is the state of one owner of the job with workers: a
// state.Store holding one owner database.
type partition struct {
	o *state.Owner
}

func openPartition(st *state.Store, owner string) (partition, error) {
	o, err := st.Owner(owner)
	if err != nil {
		return partition{}, fmt.Errorf("demo: state: %w", err)
	}
	return partition{o: o}, nil
}

// add folds counts (word → records) into the partition, words and total
// in one atomic batch.
func (p partition) add(counts map[string]uint64) error {
	var n uint64
	err := p.o.Apply(func(b *state.Batch) error {
		for _, w := range slices.Sorted(maps.Keys(counts)) {
			k := append(slices.Clone(partWordPrefix), w...)
			cur, _, err := p.o.Get(k)
			if err != nil {
				return err
			}
			if err := b.Set(k, be(u64(cur)+counts[w])); err != nil {
				return err
			}
			n += counts[w]
		}
		total, err := p.total()
		if err != nil {
			return err
		}
		return b.Set(partTotalKey, be(total+n))
	})
	if err != nil {
		return fmt.Errorf("demo: state of %s: %w", p.o.ID(), err)
	}
	return nil
}

// total returns the number of records folded into the partition.
func (p partition) total() (uint64, error) {
	v, _, err := p.o.Get(partTotalKey)
	if err != nil {
		return 0, fmt.Errorf("demo: state of %s: total: %w", p.o.ID(), err)
	}
	return u64(v), nil
}

// addAll adds the partition's word counts to out.
func (p partition) addAll(out map[string]uint64) error {
	for kv, err := range p.o.Scan(partWordPrefix) {
		if err != nil {
			return fmt.Errorf("demo: state of %s: scan: %w", p.o.ID(), err)
		}
		out[string(kv.Key[len(partWordPrefix):])] += u64(kv.Value)
	}
	return nil
}
