package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
	"github.com/tidemark-io/tidemark/checkpoint"
)

func TestSavepointCreateCopyVerifyRestoreRemove(t *testing.T) {
	src := ranDemo(t)
	dst := fileURL(t.TempDir())
	var created struct {
		Checkpoint string `json:"checkpoint"`
		Size       int64  `json:"size"`
	}
	mustJSON(t, src, &created, "savepoint", "create", "v1")
	if created.Checkpoint == "" || created.Size == 0 {
		t.Fatalf("savepoint create: %+v", created)
	}
	must(t, "", "savepoint", "cp", "v1", src, dst)
	var v verifyResult
	mustJSON(t, dst, &v, "verify", "v1")
	if !v.OK || v.Kind != "savepoint" || v.Source != created.Checkpoint || v.Files == 0 {
		t.Fatalf("verify of the copy: %+v", v)
	}
	// Restore in the other store: it becomes its latest completed checkpoint.
	must(t, dst, "savepoint", "restore", "v1")
	var show struct {
		Checkpoint checkpointInfo `json:"checkpoint"`
	}
	mustJSON(t, dst, &show, "show", "latest-completed")
	if show.Checkpoint.ID != created.Checkpoint {
		t.Fatalf("latest completed of the restored store is %s, want %s", show.Checkpoint.ID, created.Checkpoint)
	}
	must(t, dst, "verify", "latest-completed")

	var sps []savepointInfo
	mustJSON(t, src, &sps, "savepoint", "ls")
	if len(sps) != 1 || sps[0].Label != "v1" || sps[0].Size != created.Size {
		t.Fatalf("savepoint ls: %+v", sps)
	}
	must(t, src, "savepoint", "rm", "v1")
	if _, _, code := tm(t, src, "savepoint", "rm", "v1"); code != exitError {
		t.Fatalf("second rm: exit %d, want 1", code)
	}
	mustJSON(t, src, &sps, "savepoint", "ls")
	if len(sps) != 0 {
		t.Fatalf("savepoint ls after rm: %+v", sps)
	}
}

func TestSavepointCopyRefusesACorruptSavepoint(t *testing.T) {
	src := ranDemo(t)
	dst := fileURL(t.TempDir())
	must(t, src, "savepoint", "create", "v1")
	corruptSavepoint(t, openURL(t, src), "v1")
	if _, errOut, code := tm(t, "", "savepoint", "cp", "v1", src, dst); code != exitVerify {
		t.Fatalf("cp of a corrupt savepoint: exit %d, want 3\n%s", code, errOut)
	}
	if _, _, code := tm(t, src, "verify", "v1"); code != exitVerify {
		t.Fatalf("verify of a corrupt savepoint: exit %d, want 3", code)
	}
	var sps []savepointInfo
	mustJSON(t, dst, &sps, "savepoint", "ls")
	if len(sps) != 0 {
		t.Fatalf("a corrupt copy became visible in the destination: %+v", sps)
	}
}

// A copy or restore of a damaged savepoint into a directory that did not
// exist leaves no directory behind (opening a file store creates its
// directory, before the damage is known).
func TestRefusedCopyOrRestoreLeavesNoNewDirectory(t *testing.T) {
	src := ranDemo(t)
	must(t, src, "savepoint", "create", "v1")
	corruptSavepoint(t, openURL(t, src), "v1")
	parent := t.TempDir()
	for _, args := range [][]string{
		{"savepoint", "cp", "v1", src, fileURL(filepath.Join(parent, "cp", "nested"))},
		{"savepoint", "restore", "v1", "--from", src, "--store", fileURL(filepath.Join(parent, "restore", "nested"))},
		{"savepoint", "cp", "nope", src, fileURL(filepath.Join(parent, "missing"))},
	} {
		if _, errOut, code := tm(t, "", args...); code == exitOK {
			t.Fatalf("tidemark %s: exit 0\n%s", strings.Join(args, " "), errOut)
		}
		if entries, err := os.ReadDir(parent); err != nil || len(entries) != 0 {
			t.Fatalf("tidemark %s, refused, left %v (%v) in the parent directory", strings.Join(args, " "), entries, err)
		}
	}
	// A directory that was there stays, empty or not.
	keep := filepath.Join(parent, "kept")
	if err := os.Mkdir(keep, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, _, code := tm(t, "", "savepoint", "cp", "v1", src, fileURL(keep)); code != exitVerify {
		t.Fatalf("cp of a corrupt savepoint into an existing directory: exit %d, want 3", code)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Fatalf("the existing destination directory was removed: %v", err)
	}
}

// The before-upgrade story: a savepoint restored onto the store it was
// taken from, after newer checkpoints, becomes the latest completed
// checkpoint under a fresh id; a refused restore leaves _writer as it was.
func TestSavepointRestoreOntoItsOwnStoreRollsBack(t *testing.T) {
	dir := t.TempDir()
	store := fileURL(filepath.Join(dir, "store"))
	if _, _, code := tm(t, "", demoArgs(dir, store, "--crash-after-records", "14000")...); code != exitCrashed {
		t.Fatalf("crashing demo: exit %d, want %d", code, exitCrashed)
	}
	must(t, store, "savepoint", "create", "before-upgrade")
	var before struct {
		Checkpoints []struct{ ID string } `json:"checkpoints"`
	}
	must(t, "", demoArgs(dir, store)...) // the job goes on: newer checkpoints
	mustJSON(t, store, &before, "ls", "--output", "json")
	newest := before.Checkpoints[len(before.Checkpoints)-1].ID

	var res struct {
		Checkpoint     string `json:"checkpoint"`
		RolledBackFrom string `json:"rolled_back_from"`
	}
	mustJSON(t, store, &res, "savepoint", "restore", "before-upgrade", "--output", "json")
	if want, _ := checkpoint.NextID(newest); res.Checkpoint != want || res.RolledBackFrom == "" || res.RolledBackFrom >= newest {
		t.Fatalf("rollback %+v: want a new lineage at %s from an older checkpoint", res, want)
	}
	var lc struct {
		Checkpoint struct {
			ID string `json:"id"`
		} `json:"checkpoint"`
	}
	mustJSON(t, store, &lc, "show", "latest-completed", "--output", "json")
	if lc.Checkpoint.ID != res.Checkpoint {
		t.Fatalf("latest completed is %s, want the rolled-back %s", lc.Checkpoint.ID, res.Checkpoint)
	}

	// A refused restore (the savepoint is corrupt) must not take the
	// writer role: _writer is byte-for-byte what it was.
	bs := openURL(t, store)
	writer := string(blobstoretest.Get(t, bs, "_writer"))
	corruptSavepoint(t, bs, "before-upgrade")
	if _, errOut, code := tm(t, store, "savepoint", "restore", "before-upgrade"); code != exitVerify {
		t.Fatalf("restore of a corrupt savepoint: exit %d, want %d\n%s", code, exitVerify, errOut)
	}
	if got := string(blobstoretest.Get(t, bs, "_writer")); got != writer {
		t.Fatalf("a refused restore changed _writer:\n%s\nwas\n%s", got, writer)
	}
}

// corruptSavepoint flips a byte in the middle of savepoint label's archive.
func corruptSavepoint(t *testing.T, bs blobstore.Blobstore, label string) {
	t.Helper()
	b := blobstoretest.Get(t, bs, checkpoint.SavepointKey(label))
	b[len(b)/2] ^= 0xff
	if err := bs.Put(t.Context(), checkpoint.SavepointKey(label), bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
}

func TestSavepointCreateWithoutCompletedCheckpointSaysSoOnce(t *testing.T) {
	dir := t.TempDir()
	store := fileURL(dir)
	_, errOut, code := tm(t, store, "savepoint", "create", "v1")
	if code != 1 || strings.Count(errOut, "checkpoint:") != 0 || strings.Count(errOut, "no completed checkpoint") != 1 || !strings.Contains(errOut, `"v1"`) {
		t.Fatalf("savepoint create on a store without a completed checkpoint: exit %d, stderr %q; want 1, saying once that there is no completed checkpoint", code, errOut)
	}
}
