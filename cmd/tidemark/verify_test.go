package main

import (
	"strings"
	"testing"

	"github.com/tidemark-io/tidemark/blobstorage"
)

func TestVerifyCheckpointDetectsCorruptionWithExitThree(t *testing.T) {
	store := ranDemo(t)
	must(t, store, "verify", "latest-completed")
	var show struct {
		Files map[string][]blobstorage.FileRef `json:"files"`
	}
	mustJSON(t, store, &show, "show", "latest-completed")
	ctx := t.Context()
	bs := openURL(t, store)
	victim := show.Files["counts"][0].Key
	if err := bs.Put(ctx, victim, strings.NewReader("not the state")); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := tm(t, store, "verify", "latest-completed")
	if code != exitVerify || !strings.Contains(out, "FAILED") || !strings.Contains(out, victim) {
		t.Fatalf("verify of a corrupt checkpoint: exit %d, stdout %q; want 3, FAILED naming %s", code, out, victim)
	}
	// The damage is said once, in the verdict.
	if strings.Contains(errOut, victim) {
		t.Errorf("verify said the damage twice; stderr: %q", errOut)
	}
	if err := bs.Delete(ctx, victim); err != nil {
		t.Fatal(err)
	}
	if _, _, code := tm(t, store, "verify", "latest-completed"); code != exitVerify {
		t.Fatalf("verify with a missing file: exit %d, want 3", code)
	}
}

// show and verify validate their argument the same way: a name that is
// no checkpoint id, alias or (for verify) savepoint label is a usage error
// saying what is accepted, not a checkpoint that was not found.
func TestShowAndVerifyRefuseANameThatCannotBeOne(t *testing.T) {
	store := fileURL(t.TempDir())
	for _, name := range []string{"", ".", "..", "/", "../../etc", "a/b", strings.Repeat("x", 300)} {
		for _, cmd := range []string{"show", "verify"} {
			_, errOut, code := tm(t, store, cmd, name)
			if code != exitUsage || !strings.Contains(errOut, "latest-completed") || strings.Contains(errOut, "not found") {
				t.Errorf("%s %q: exit %d, want %d saying what is accepted\n%s", cmd, name, code, exitUsage, errOut)
			}
		}
	}
	_, errOut, code := tm(t, store, "show", "ckpt-99999999999999999999")
	if code != exitUsage || strings.Contains(errOut, "strconv") || !strings.Contains(errOut, "ckpt-18446744073709551615") {
		t.Errorf("show of an id past the last: exit %d, want %d naming the last id\n%s", code, exitUsage, errOut)
	}
}
