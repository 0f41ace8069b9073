package main

import (
	"strings"
	"testing"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/checkpoint"
)

func TestShowPrintsOffsetsAndFiles(t *testing.T) {
	store := ranDemo(t)
	var show struct {
		Checkpoint checkpointInfo                   `json:"checkpoint"`
		Offsets    map[string]any                   `json:"offsets"`
		Files      map[string][]blobstorage.FileRef `json:"files"`
	}
	mustJSON(t, store, &show, "show", "latest-completed")
	if show.Offsets["next"] != float64(20000) || len(show.Files["counts"]) == 0 || len(show.Files["totals"]) == 0 {
		t.Fatalf("show: %+v, want offset 20000 and files of both owners", show)
	}
	text := must(t, store, "show", show.Checkpoint.ID)
	if !strings.Contains(text, "completed") || !strings.Contains(text, `"next":20000`) {
		t.Fatalf("show text:\n%s", text)
	}
	if _, _, code := tm(t, store, "show", checkpoint.NewID(12345)); code != exitError {
		t.Fatalf("show of a missing checkpoint: exit %d, want 1", code)
	}
}

// An id that is not of the form ls prints is a usage error (2), not a
// checkpoint that was not found (1).
func TestShowOfAMalformedIDIsAUsageError(t *testing.T) {
	store := fileURL(t.TempDir())
	for _, id := range []string{"nonsense", "ckpt-12", "../x"} {
		_, errOut, code := tm(t, store, "show", id)
		if code != exitUsage {
			t.Errorf("show %s: exit %d, want %d\n%s", id, code, exitUsage, errOut)
		}
	}
	if _, errOut, code := tm(t, store, "show", "ckpt-00000000000000000099"); code != exitError || strings.Count(errOut, "ckpt-00000000000000000099") != 1 {
		t.Errorf("show of a missing id: exit %d, want %d, naming the id once:\n%s", code, exitError, errOut)
	}
}
