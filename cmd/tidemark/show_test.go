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
