package main

import (
	"bytes"
	"testing"

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
	ctx := t.Context()
	bs := openURL(t, src)
	rc, err := bs.Get(ctx, checkpoint.SavepointKey("v1"))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	_, err = buf.ReadFrom(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	b[len(b)/2] ^= 0xff // a flipped byte in the middle of the archive
	if err := bs.Put(ctx, checkpoint.SavepointKey("v1"), bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
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
