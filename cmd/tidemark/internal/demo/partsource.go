package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/job"
)

// partOffsets are the offsets of a job with workers: per partition, the
// next record of the source to scan (At) and how many it yielded (N).
// Records and Words identify the job, as in Offsets. A rescale merges
// the slots' offsets into one map of every partition (see
// job.WorkerConfig.Source).
type partOffsets struct {
	Records    uint64             `json:"records"`
	Words      int                `json:"words"`
	Partitions map[string]partPos `json:"partitions"`
}

type partPos struct {
	At uint64 `json:"at"`
	N  uint64 `json:"n"`
}

// read returns the number of records the partitions yielded in all.
func (o partOffsets) read() uint64 {
	var n uint64
	for _, p := range o.Partitions {
		n += p.N
	}
	return n
}

// workersOffsets merges the offsets of every slot of cp, a checkpoint of
// a job with workers.
func workersOffsets(cp *checkpoint.CheckpointData) (partOffsets, error) {
	var bySlot map[string]partOffsets
	if err := json.Unmarshal(cp.Offsets(), &bySlot); err != nil {
		return partOffsets{}, fmt.Errorf("demo: checkpoint %s: offsets %s: %w", cp.ID, cp.Offsets(), err)
	}
	all := partOffsets{Partitions: map[string]partPos{}}
	for _, o := range bySlot {
		all.Records, all.Words = o.Records, o.Words
		maps.Copy(all.Partitions, o.Partitions)
	}
	return all, nil
}

// partsOf returns the partitions of slot among n slots: p % n == slot.
func partsOf(slot, n int) []int {
	var out []int
	for p := range DefaultOwners {
		if p%n == slot {
			out = append(out, p)
		}
	}
	return out
}

// partSource is the Source of one slot: partition p of the generated
// source yields, in order, the records whose word is owned by part p
// (partitionOf), so a slot's owners are exactly its partitions'.
type partSource struct {
	src   *Source
	parts []int
	pos   map[int]*partPos
	batch int
	slow  time.Duration
}

func newPartSource(records uint64, words, batch int, parts []int, slow time.Duration) *partSource {
	return &partSource{src: NewSource(records, words), parts: parts, batch: batch, slow: slow}
}

// Seek takes this slot's partitions of offsets (every slot's, merged, on
// a rescale); nil starts every partition at the beginning.
func (s *partSource) Seek(_ context.Context, offsets []byte) error {
	s.pos = map[int]*partPos{}
	var o partOffsets
	if offsets != nil {
		if err := json.Unmarshal(offsets, &o); err != nil {
			return fmt.Errorf("demo: offsets %s: %w", offsets, err)
		}
		if o.Records != s.src.Records() || o.Words != s.src.Words() {
			return fmt.Errorf("%w: offsets %s are of another job", ErrJobMismatch, offsets)
		}
	}
	for _, p := range s.parts {
		pos, ok := o.Partitions[strconv.Itoa(p)]
		if offsets != nil && !ok {
			return fmt.Errorf("demo: offsets %s do not hold partition %d", offsets, p)
		}
		s.pos[p] = &pos
	}
	return nil
}

// Next reads up to a batch, a share from each partition in turn.
func (s *partSource) Next(ctx context.Context) ([]job.Record, error) {
	if s.slow > 0 {
		select {
		case <-time.After(s.slow):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	share := max(1, s.batch/len(s.parts))
	var out []job.Record
	done := true
	for _, p := range s.parts {
		pos := s.pos[p]
		for n := 0; n < share && pos.At < s.src.Records(); pos.At++ {
			if w := s.src.At(pos.At); partitionOf(w, DefaultOwners) == p {
				out = append(out, job.Record{Key: []byte(w)})
				pos.N++
				n++
			}
		}
		done = done && pos.At >= s.src.Records()
	}
	if done {
		return out, io.EOF
	}
	return out, nil
}

func (s *partSource) Offsets() ([]byte, error) {
	o := partOffsets{Records: s.src.Records(), Words: s.src.Words(), Partitions: map[string]partPos{}}
	for _, p := range slices.Sorted(maps.Keys(s.pos)) {
		o.Partitions[strconv.Itoa(p)] = *s.pos[p]
	}
	return json.Marshal(o)
}
