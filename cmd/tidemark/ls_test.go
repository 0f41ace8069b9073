package main

import (
	"encoding/json"
	"path/filepath"
	"slices"
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
	if !slices.Equal(last.Pointers, []string{"latest", "latest-completed"}) || last.Status != checkpoint.StatusCompleted || last.Size == 0 || last.Files == 0 {
		t.Fatalf("newest checkpoint %+v: want completed, both pointers, files", last)
	}
	// Scripts read the pointers as a JSON array, not a joined string.
	var raw struct {
		Checkpoints []map[string]json.RawMessage `json:"checkpoints"`
	}
	mustJSON(t, store, &raw, "ls")
	var ptrs []string
	if err := json.Unmarshal(raw.Checkpoints[len(raw.Checkpoints)-1]["pointers"], &ptrs); err != nil || len(ptrs) != 2 {
		t.Errorf(`ls --output json: "pointers" = %s (%v), want an array of the two pointers`, raw.Checkpoints[len(raw.Checkpoints)-1]["pointers"], err)
	}
	text := must(t, store, "ls")
	for _, want := range []string{"CHECKPOINT", last.ID, "latest-completed", "SAVEPOINT", "v1"} {
		if !strings.Contains(text, want) {
			t.Errorf("ls text output lacks %q:\n%s", want, text)
		}
	}
}

// A read command on a store path that does not exist is an error, not an
// empty store: a typo must not look like "no checkpoints" (finding 13).
func TestReadCommandsOnAMissingStorePathFail(t *testing.T) {
	store := fileURL(filepath.Join(t.TempDir(), "no", "such", "dir"))
	for _, args := range [][]string{{"ls"}, {"show", "latest"}, {"verify", "latest-completed"}, {"savepoint", "ls"}, {"gc"}} {
		out, errOut, code := tm(t, store, args...)
		if code != exitError || !strings.Contains(errOut, "does not exist") {
			t.Errorf("%v on a missing path: exit %d, want %d saying it does not exist\nstdout: %s\nstderr: %s", args, code, exitError, out, errOut)
		}
	}
}
