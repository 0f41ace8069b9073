package main

import (
	"strings"
	"testing"

	"github.com/tidemark-io/tidemark/checkpoint"
)

func TestLsListsCheckpointsWithPointersAndSavepoints(t *testing.T) {
	store := ranDemo(t)
	must(t, store, "savepoint", "create", "v1")
	var ls struct {
		Checkpoints []checkpointInfo `json:"checkpoints"`
		Savepoints  []savepointInfo  `json:"savepoints"`
	}
	mustJSON(t, store, &ls, "ls")
	if len(ls.Checkpoints) == 0 || len(ls.Savepoints) != 1 || ls.Savepoints[0].Label != "v1" {
		t.Fatalf("ls: %+v, want checkpoints and savepoint v1", ls)
	}
	last := ls.Checkpoints[len(ls.Checkpoints)-1]
	if last.Latest != "latest,latest-completed" || last.Status != checkpoint.StatusCompleted || last.Size == 0 || last.Files == 0 {
		t.Fatalf("newest checkpoint %+v: want completed, both pointers, files", last)
	}
	text := must(t, store, "ls")
	for _, want := range []string{"CHECKPOINT", last.ID, "latest-completed", "SAVEPOINT", "v1"} {
		if !strings.Contains(text, want) {
			t.Errorf("ls text output lacks %q:\n%s", want, text)
		}
	}
}
