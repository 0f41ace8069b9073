package demo

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/tidemark-io/tidemark/checkpoint"
)

// shapeError is the refusal of a job run in another shape than its
// checkpoints': with workers when it ran in one process, or the other
// way round. It says how to resume and matches ErrJobMismatch.
type shapeError struct{ msg string }

func (e *shapeError) Error() string        { return e.msg }
func (e *shapeError) Is(target error) bool { return target == ErrJobMismatch }

// ranWithWorkers reports whether cp is a checkpoint of a job with
// workers: its owners are the partitions part-NN. It returns them sorted.
func ranWithWorkers(cp *checkpoint.CheckpointData) (bool, []string) {
	owners := slices.Sorted(maps.Keys(cp.StateDirs))
	if len(owners) == 0 {
		return false, owners
	}
	for _, o := range owners {
		if !strings.HasPrefix(o, "part-") {
			return false, owners
		}
	}
	return true, owners
}

// ranInOneProcess reports whether cp is a checkpoint of a job run in one
// process (owners counts and totals).
func ranInOneProcess(cp *checkpoint.CheckpointData) bool {
	return slices.Equal(slices.Sorted(maps.Keys(cp.StateDirs)), []string{OwnerCounts, OwnerTotals})
}

// oneProcessShape refuses, for a run in one process, a checkpoint of a
// job with workers.
func oneProcessShape(cp *checkpoint.CheckpointData) error {
	if ok, owners := ranWithWorkers(cp); ok {
		return &shapeError{fmt.Sprintf("demo: this job runs with workers (owners %s…%s, checkpoint %s): resume with --workers N",
			owners[0], owners[len(owners)-1], cp.ID)}
	}
	return nil
}

// workersShape refuses, for a run with workers, a checkpoint of a job
// run in one process.
func workersShape(cp *checkpoint.CheckpointData) error {
	if ranInOneProcess(cp) {
		return &shapeError{fmt.Sprintf("demo: this job runs in one process (checkpoint %s): resume without --workers", cp.ID)}
	}
	return nil
}
