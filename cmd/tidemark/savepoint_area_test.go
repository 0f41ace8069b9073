package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidemark-io/tidemark/archive"
	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/savepoint"
)

type sentResult struct {
	Checkpoint string `json:"checkpoint"`
	Size       int64  `json:"size"`
	Files      int    `json:"files"`
	Uploaded   int64  `json:"uploaded_bytes"`
	Sent       int64  `json:"sent_bytes"`
}

// A second savepoint, after the job ran on, uploads only what changed,
// and its copy to a store holding the first sends only what changed.
func TestSavepointCreateAndCopySendOnlyWhatChanged(t *testing.T) {
	dir := t.TempDir()
	src, dst := fileURL(filepath.Join(dir, "store")), fileURL(t.TempDir())
	if _, _, code := tm(t, "", demoArgs(filepath.Join(dir, "job"), src, "--crash-after-records", "9000")...); code != exitCrashed {
		t.Fatalf("crashing demo: exit %d, want %d", code, exitCrashed)
	}
	var v1, v2, cp1, cp2 sentResult
	mustJSON(t, src, &v1, "savepoint", "create", "v1")
	if v1.Uploaded == 0 || v1.Uploaded > v1.Size {
		t.Fatalf("first savepoint: %+v", v1)
	}
	mustJSON(t, "", &cp1, "savepoint", "cp", "v1", src, dst)
	must(t, "", demoArgs(filepath.Join(dir, "job"), src)...) // the job goes on
	mustJSON(t, src, &v2, "savepoint", "create", "v2")
	mustJSON(t, "", &cp2, "savepoint", "cp", "v2", src, dst)
	if v2.Checkpoint == v1.Checkpoint || v2.Uploaded >= v2.Size || cp2.Sent != v2.Uploaded || cp1.Sent != v1.Uploaded {
		t.Fatalf("v1 %+v copied %+v; v2 %+v copied %+v: want v2 and its copy to send only what v1 lacks", v1, cp1, v2, cp2)
	}
	var v verifyResult
	mustJSON(t, dst, &v, "verify", "v2")
	if !v.OK || v.Source != v2.Checkpoint {
		t.Fatalf("verify of the copy: %+v", v)
	}
	t.Logf("v2: %d bytes, uploaded %d, copy sent %d", v2.Size, v2.Uploaded, cp2.Sent)
}

func TestSavepointExportPassesTarAndSha256sumAndImports(t *testing.T) {
	for _, bin := range []string{"tar", "sha256sum", "jq", "sh"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("SKIPPED: no %s command (%v); checkpoint's TestExportedSavepointPassesTarAndSha256sum covers the format", bin, err)
		}
	}
	src, dst := ranDemo(t), fileURL(t.TempDir())
	must(t, src, "savepoint", "create", "v1")
	dir := t.TempDir()
	file := filepath.Join(dir, "v1.tar")
	must(t, src, "savepoint", "export", "v1", file)
	x := filepath.Join(dir, "x")
	os.Mkdir(x, 0o755)
	// What docs/savepoints.md tells an operator to run.
	cmd := exec.Command("sh", "-c", `tar -xf "$1" && jq -r '.files[] | "\(.sha256)  \(.path)"' MANIFEST.json | sha256sum -c`, "sh", file)
	cmd.Dir = x
	out, err := cmd.CombinedOutput()
	if err != nil || strings.Count(string(out), ": OK") < 3 || strings.Contains(string(out), "FAILED") {
		t.Fatalf("tar -x + sha256sum -c: %v\n%s", err, out)
	}
	var imp sentResult
	mustJSON(t, dst, &imp, "savepoint", "import", file, "v1")
	mustJSON(t, dst, &imp, "savepoint", "import", file, "v1-again")
	if imp.Uploaded != 0 {
		t.Fatalf("a second import of the same file uploaded %d bytes", imp.Uploaded)
	}
	if _, _, code := tm(t, dst, "savepoint", "import", file, "v1"); code != exitError {
		t.Fatalf("import onto a taken label: exit %d, want 1", code)
	}
	must(t, dst, "savepoint", "restore", "v1-again")
	must(t, dst, "verify", "latest-completed")
	// A damaged file is refused, and stores nothing.
	b, _ := os.ReadFile(file)
	b[len(b)-2048] ^= 1 // in the last file's content
	bad := filepath.Join(dir, "bad.tar")
	os.WriteFile(bad, b, 0o644)
	if _, errOut, code := tm(t, dst, "savepoint", "import", bad, "bad"); code != exitVerify {
		t.Fatalf("import of a damaged file: exit %d, want 3\n%s", code, errOut)
	}
	var sps []savepointInfo
	mustJSON(t, dst, &sps, "savepoint", "ls")
	if len(sps) != 2 || sps[0].Format != "manifest" {
		t.Fatalf("savepoint ls: %+v", sps)
	}
}

func TestSavepointRmFreesOnlyContentNoOtherSavepointUses(t *testing.T) {
	src := ranDemo(t)
	bs := openURL(t, src)
	must(t, src, "savepoint", "create", "v1")
	must(t, src, "savepoint", "create", "v2") // the same checkpoint: the same content
	var rm struct {
		Freed int `json:"freed_objects"`
		Kept  int `json:"kept_objects"`
	}
	mustJSON(t, src, &rm, "savepoint", "rm", "v1", "--grace", "0")
	if rm.Freed != 0 {
		t.Fatalf("rm v1 freed %d objects v2 uses", rm.Freed)
	}
	must(t, src, "verify", "v2", "--deep")
	content := blobstoretest.ListKeys(t, bs, savepoint.ContentPrefix)
	// A savepoint operation in progress (its lock): rm refuses, changing nothing.
	lock := savepoint.LockPrefix + "shared-0123456789abcdef"
	if err := bs.Put(t.Context(), lock, strings.NewReader(`{"kind":"shared","op":"create savepoint x"}`)); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := tm(t, src, "savepoint", "rm", "v2", "--grace", "0", "--wait", "0"); code != exitError || !strings.Contains(errOut, "nothing changed") || !strings.Contains(errOut, "create savepoint x") {
		t.Fatalf("rm beside a create: exit %d, want 1 naming the create\n%s", code, errOut)
	}
	must(t, src, "verify", "v2")
	bs.Delete(t.Context(), lock)
	mustJSON(t, src, &rm, "savepoint", "rm", "v2", "--grace", "0")
	if rm.Freed != len(content) || len(blobstoretest.ListKeys(t, bs, savepoint.AreaPrefix)) != 0 {
		t.Fatalf("rm of the last savepoint freed %d of %d objects, left %v", rm.Freed, len(content), blobstoretest.ListKeys(t, bs, savepoint.AreaPrefix))
	}
}

// oldSavepoint stores the latest completed checkpoint of store as
// savepoint label the way every savepoint was stored before the
// savepoint area: one archive object.
func oldSavepoint(t *testing.T, store, label string) {
	t.Helper()
	bs := openURL(t, store)
	s := readStorage(bs)
	cp, err := s.LoadLatestCompleted(t.Context())
	if err != nil || cp == nil {
		t.Fatal(cp, err)
	}
	var buf bytes.Buffer
	if err := checkpoint.ArchiveCheckpoint(t.Context(), s, cp.ID, &buf); err != nil {
		t.Fatal(err)
	}
	if err := bs.Put(t.Context(), checkpoint.SavepointKey(label), &buf); err != nil {
		t.Fatal(err)
	}
}

func TestAnOldFormatSavepointWorksWithEveryCommand(t *testing.T) {
	src, dst := ranDemo(t), fileURL(t.TempDir())
	oldSavepoint(t, src, "old")
	var sps []savepointInfo
	mustJSON(t, src, &sps, "savepoint", "ls")
	if len(sps) != 1 || sps[0].Format != "archive" {
		t.Fatalf("savepoint ls: %+v", sps)
	}
	must(t, src, "verify", "old")
	must(t, src, "verify", "old", "--deep")
	must(t, src, "inspect", "old")
	must(t, src, "diff", "old", "latest-completed")
	file := filepath.Join(t.TempDir(), "old.tar")
	must(t, src, "savepoint", "export", "old", file)
	if _, err := archive.Verify(t.Context(), bytes.NewReader(mustRead(t, file)), archive.Limits{}); err != nil {
		t.Fatal(err)
	}
	must(t, "", "savepoint", "cp", "old", src, dst)
	mustJSON(t, dst, &sps, "savepoint", "ls")
	if len(sps) != 1 || sps[0].Format != "manifest" {
		t.Fatalf("the copy: %+v, want it stored by content", sps)
	}
	must(t, dst, "savepoint", "restore", "old")
	must(t, dst, "verify", "latest-completed")
	must(t, src, "savepoint", "rm", "old")
	if ok, _ := openURL(t, src).Exists(t.Context(), checkpoint.SavepointKey("old")); ok {
		t.Fatal("rm left the archive")
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A content object damaged in the store: verify and verify --deep fail
// naming it, and so does scrub.
func TestDamagedSavepointContentIsNamed(t *testing.T) {
	src := ranDemo(t)
	bs := openURL(t, src)
	must(t, src, "savepoint", "create", "v1")
	keys := blobstoretest.ListKeys(t, bs, savepoint.ContentPrefix)
	key := keys[len(keys)/2]
	b := blobstoretest.Get(t, bs, key)
	if len(b) == 0 {
		key = keys[0]
		b = blobstoretest.Get(t, bs, key)
	}
	damaged := append([]byte("X"), b...)
	if err := bs.Put(t.Context(), key, bytes.NewReader(damaged)); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"verify", "v1"}, {"verify", "v1", "--deep"}, {"scrub"}} {
		out, errOut, code := tm(t, src, args...)
		if code != exitVerify || !strings.Contains(out+errOut, key) {
			t.Fatalf("tidemark %s: exit %d, want 3 naming %s\n%s%s", strings.Join(args, " "), code, key, out, errOut)
		}
	}
	var deep deepResult
	out, _, _ := tm(t, src, "verify", "v1", "--deep", "--output", "json")
	if err := json.Unmarshal([]byte(out), &deep); err != nil || len(deep.Damaged) != 1 || deep.Damaged[0].Key != key || deep.Damaged[0].Path == "" {
		t.Fatalf("verify --deep: %+v, %v", deep, err)
	}
}
