package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
	"github.com/tidemark-io/tidemark/checkpoint"
)

func savepointBytes(t *testing.T, store, label string) []byte {
	t.Helper()
	return blobstoretest.Get(t, openURL(t, store), checkpoint.SavepointKey(label))
}

// TestSavepointCreateAndCpRefuseATakenLabel: create and cp refuse a label
// the (destination) store holds, exit 1 with an error naming the label and
// the checkpoint it holds, and change nothing; --replace replaces it.
func TestSavepointCreateAndCpRefuseATakenLabel(t *testing.T) {
	src := ranDemo(t)
	dst := fileURL(t.TempDir())
	var created struct {
		Checkpoint string `json:"checkpoint"`
	}
	mustJSON(t, src, &created, "savepoint", "create", "v1")
	before := savepointBytes(t, src, "v1")

	_, errOut, code := tm(t, src, "savepoint", "create", "v1")
	if code != exitError {
		t.Errorf("create of a taken label: exit %d, want %d", code, exitError)
	}
	want := `savepoint "v1" already exists in the store (it holds checkpoint ` + created.Checkpoint + `)`
	if !strings.Contains(errOut, want) || !strings.Contains(errOut, "--replace") {
		t.Errorf("stderr %q does not say %q and --replace", errOut, want)
	}
	if !bytes.Equal(savepointBytes(t, src, "v1"), before) {
		t.Fatal("a refused create changed the savepoint")
	}

	must(t, "", "savepoint", "cp", "v1", src, dst)
	// Something else under the label in dst: a refused cp must keep it.
	if err := openURL(t, dst).Put(t.Context(), checkpoint.SavepointKey("v1"), strings.NewReader("theirs")); err != nil {
		t.Fatal(err)
	}
	_, errOut, code = tm(t, "", "savepoint", "cp", "v1", src, dst)
	if code != exitError {
		t.Errorf("cp onto a taken label: exit %d, want %d", code, exitError)
	}
	if want := `savepoint "v1" already exists in ` + dst + ` (it holds a checkpoint)`; !strings.Contains(errOut, want) {
		t.Errorf("stderr %q does not say %q", errOut, want)
	}
	if got := savepointBytes(t, dst, "v1"); string(got) != "theirs" {
		t.Fatal("a refused cp changed the destination's savepoint")
	}
	must(t, "", "savepoint", "cp", "v1", src, dst, "--replace")
	if !bytes.Equal(savepointBytes(t, dst, "v1"), before) {
		t.Fatal("cp --replace did not replace the destination's savepoint")
	}

	// --replace on create replaces whatever the label held.
	if err := openURL(t, src).Put(t.Context(), checkpoint.SavepointKey("v1"), strings.NewReader("junk")); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := tm(t, src, "savepoint", "create", "v1"); code != exitError || !strings.Contains(errOut, "(it holds a checkpoint)") {
		t.Errorf("create over junk: exit %d, stderr %q", code, errOut)
	}
	must(t, src, "savepoint", "create", "v1", "--replace")
	must(t, src, "verify", "v1")
}

// TestSavepointCreateRefusesUnportableLabels: a new label is A-Z, a-z,
// 0-9, '.', '_' and '-' (not leading '.' or '-'); anything else is a usage
// error before the store is touched.
func TestSavepointCreateRefusesUnportableLabels(t *testing.T) {
	src := ranDemo(t)
	for _, label := range []string{"a b", `a\b`, ".hidden", "a:b", "ü", "a*b"} {
		_, errOut, code := tm(t, src, "savepoint", "create", label)
		if code != exitUsage {
			t.Errorf("create %q: exit %d, want %d\n%s", label, code, exitUsage, errOut)
		}
		if _, err := openURL(t, src).Stat(t.Context(), checkpoint.SavepointKey(label)); !errors.Is(err, blobstore.ErrNotFound) && !errors.Is(err, blobstore.ErrInvalidKey) {
			t.Errorf("create %q wrote a savepoint (stat: %v)", label, err)
		}
	}
	var sps []savepointInfo
	mustJSON(t, src, &sps, "savepoint", "ls")
	if len(sps) != 0 {
		t.Fatalf("savepoints after refused creates: %+v", sps)
	}
}
