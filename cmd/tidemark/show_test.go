package main

import (
	"strings"
	"testing"
	"time"

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

// show names the workers a checkpoint's parts came from and the remote
// objects it references, in text and JSON.
func TestShowNamesWorkersAndRemoteObjects(t *testing.T) {
	t.Run("workers", func(t *testing.T) {
		store := fileURL(t.TempDir())
		must(t, "", demoArgs(t.TempDir(), store, append([]string{"--workers", "2"}, workerArgs...)...)...)
		var show struct {
			Workers map[string]string `json:"workers"`
		}
		mustJSON(t, store, &show, "show", "latest")
		ids := map[string]int{}
		for _, w := range show.Workers {
			ids[w]++
		}
		if len(show.Workers) != 8 || len(ids) != 2 {
			t.Fatalf("show --output json: workers %v, want 8 owners over 2 workers", show.Workers)
		}
		text := must(t, store, "show", "latest")
		for w := range ids {
			if !strings.Contains(text, "workers     2 workers: ") || !strings.Contains(text, w+" (") {
				t.Fatalf("show text does not name worker %s:\n%s", w, text)
			}
		}
	})
	t.Run("remote", func(t *testing.T) {
		store := fileURL(t.TempDir())
		must(t, "", demoArgs(t.TempDir(), store, "--remote-state")...)
		var show struct {
			Remote map[string][]blobstorage.RemoteRef `json:"remote"`
		}
		mustJSON(t, store, &show, "show", "latest")
		n := 0
		for _, refs := range show.Remote {
			n += len(refs)
		}
		if n == 0 {
			t.Fatalf("show --output json of a remote-state checkpoint lists no remote objects: %+v", show)
		}
		if text := must(t, store, "show", "latest"); !strings.Contains(text, "remote      "+plural(n, "object")+", ") {
			t.Fatalf("show text does not count the %d remote objects:\n%s", n, text)
		}
	})
}

// show knows no source: the offsets of a job that is not the demo (a
// JSON document of its own shape) are printed as they are, in text and
// in JSON.
func TestShowPrintsAnySourcesOffsetsAsTheyAre(t *testing.T) {
	dir := t.TempDir()
	store := fileURL(dir)
	bs := openURL(t, store)
	s := blobstorage.New(bs, t.TempDir(), blobstorage.Options{})
	if _, err := s.Acquire(t.Context()); err != nil {
		t.Fatal(err)
	}
	const offsets = `{"partitions":{"orders-0":17,"orders-1":4},"stream":"orders"}`
	id := checkpoint.NewID(1)
	cp := &checkpoint.CheckpointData{ID: id, Timestamp: time.Now(),
		Source: map[string][]byte{checkpoint.SourceOffsetsKey: []byte(offsets)}}
	if err := s.Save(t.Context(), cp); err != nil {
		t.Fatal(err)
	}
	var show struct {
		Offsets struct {
			Partitions map[string]int `json:"partitions"`
			Stream     string         `json:"stream"`
		} `json:"offsets"`
	}
	mustJSON(t, store, &show, "show", id)
	if show.Offsets.Stream != "orders" || show.Offsets.Partitions["orders-0"] != 17 || show.Offsets.Partitions["orders-1"] != 4 {
		t.Fatalf("show --output json: offsets %+v, want the document as written", show.Offsets)
	}
	if text := must(t, store, "show", id); !strings.Contains(text, "offsets     "+offsets+"\n") {
		t.Fatalf("show text does not print the offsets as they are:\n%s", text)
	}
}
