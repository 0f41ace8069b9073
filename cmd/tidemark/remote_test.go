package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstorage/remotetest"
	"github.com/tidemark-io/tidemark/checkpoint"
)

// A store whose job runs in remote mode: gc --dry-run lists the
// unreferenced remote objects of a fenced writer with their reason and
// none of the live writer's; verify checks that every remote object is
// there and names a missing one (exit 3).
func TestGCAndVerifyOfRemoteModeStore(t *testing.T) {
	store := fileURL(t.TempDir())
	bs := openURL(t, store)
	zombie := remotetest.NewJob(t, bs, blobstorage.Options{})
	zombie.Write(t, remotetest.Model{}, 1, 0, 1500)
	zombie.Checkpoint(t, 1)
	job, _ := remotetest.Resume(t, bs, blobstorage.Options{})
	// The fenced writer keeps writing; its checkpoint (which protects
	// its objects from its own Pebble) cannot be saved.
	zombie.Write(t, remotetest.Model{}, 9, 0, 1500)
	if _, err := zombie.TryCheckpoint(t, 5); !errors.Is(err, checkpoint.ErrFenced) {
		t.Fatalf("zombie save: %v", err)
	}
	job.Write(t, remotetest.Model{}, 2, 0, 1500)
	id := job.Checkpoint(t, 2)
	time.Sleep(20 * time.Millisecond) // older than --grace

	var dry struct {
		Report blobstorage.GCReport `json:"report"`
	}
	mustJSON(t, store, &dry, "gc", "--dry-run", "--keep", "1", "--grace", "10ms")
	fenced := "/" + blobstorage.RemoteGeneration(zombie.Epoch) + "-"
	live := "/" + blobstorage.RemoteGeneration(job.Epoch) + "-"
	var listed int
	for _, d := range dry.Report.Deletions {
		if strings.Contains(d.Key, live) {
			t.Errorf("gc --dry-run would delete %q of the live writer (%s)", d.Key, d.Reason)
		}
		if strings.Contains(d.Key, fenced) && d.Reason == blobstorage.DropRemoteUnreferenced {
			listed++
		}
	}
	if listed == 0 || dry.Report.RemoteObjects != listed {
		t.Fatalf("gc --dry-run lists %d remote objects of the fenced writer (report: %d): %+v", listed, dry.Report.RemoteObjects, dry.Report.Deletions)
	}
	text := must(t, store, "gc", "--dry-run", "--keep", "1", "--grace", "10ms")
	if !strings.Contains(text, string(blobstorage.DropRemoteUnreferenced)) {
		t.Errorf("gc --dry-run text names no remote deletion:\n%s", text)
	}

	must(t, store, "verify", id)
	refs := remotetest.Referenced(t, job.Storage, id)
	var victim string
	for k := range refs {
		victim = k
		break
	}
	if err := bs.Delete(t.Context(), victim); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := tm(t, store, "verify", id)
	if code != exitVerify || !strings.Contains(out+errOut, victim) {
		t.Fatalf("verify with %s deleted: exit %d\n%s%s", victim, code, out, errOut)
	}
}
