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
	out, _, code := tm(t, store, "verify", "latest-completed")
	if code != exitVerify || !strings.Contains(out, "FAILED") || !strings.Contains(out, victim) {
		t.Fatalf("verify of a corrupt checkpoint: exit %d, stdout %q; want 3, FAILED naming %s", code, out, victim)
	}
	if err := bs.Delete(ctx, victim); err != nil {
		t.Fatal(err)
	}
	if _, _, code := tm(t, store, "verify", "latest-completed"); code != exitVerify {
		t.Fatalf("verify with a missing file: exit %d, want 3", code)
	}
}
