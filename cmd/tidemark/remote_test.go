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
	if !strings.Contains(text, blobstorage.DropRemoteUnreferenced.Describe()) {
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

// A savepoint of a remote-mode checkpoint, through the CLI: create, cp to
// another store, verify, restore there; the state then opens in remote
// mode on the target store alone and reads what was written.
func TestSavepointOfRemoteModeStoreRestoresInAnotherStore(t *testing.T) {
	src, dst := fileURL(t.TempDir()), fileURL(t.TempDir())
	job := remotetest.NewJob(t, openURL(t, src), blobstorage.Options{})
	m := remotetest.Model{}
	job.Write(t, m, 1, 0, 2000)
	id := job.Checkpoint(t, 1)
	refs := remotetest.Referenced(t, job.Storage, id)
	must(t, src, "savepoint", "create", "v1")
	must(t, "", "savepoint", "cp", "v1", src, dst)
	var v verifyResult
	mustJSON(t, dst, &v, "verify", "v1")
	if !v.OK || v.Files <= len(refs) {
		t.Fatalf("verify of the copy: %+v (the checkpoint has %d remote objects)", v, len(refs))
	}
	must(t, dst, "savepoint", "restore", "v1")
	must(t, dst, "verify", "latest-completed")
	target := openURL(t, dst)
	if got := remotetest.RemoteKeys(t, target); len(got) != len(refs) {
		t.Fatalf("target store holds %d remote objects, the checkpoint %d", len(got), len(refs))
	}
	resumed, from := remotetest.Resume(t, target, blobstorage.Options{})
	if from != id {
		t.Fatalf("resumed from %s, want %s", from, id)
	}
	if err := resumed.Read(t, m); err != nil {
		t.Fatalf("read in the target store: %v", err)
	}
}
