package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tidemark-io/tidemark/archive"
	"github.com/tidemark-io/tidemark/blobstore/memstore"
	"github.com/tidemark-io/tidemark/savepoint"
)

// nextCheckpoint saves in s a completed checkpoint 4 whose state is
// checkpoint 2's with file rel (relative to the state directory)
// rewritten.
func nextCheckpoint(t *testing.T, s *FileStorage, rel string, content []byte) {
	t.Helper()
	if err := os.CopyFS(s.StateDir(NewID(4)), os.DirFS(s.StateDir(NewID(2)))); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.StateDir(NewID(4)), filepath.FromSlash(rel)), content, 0o644); err != nil {
		t.Fatal(err)
	}
	cp, err := s.LoadSpecific(ctx, NewID(2))
	if err != nil {
		t.Fatal(err)
	}
	cp.ID = NewID(4)
	mustSave(t, s, cp)
}

func TestCreateSavepointUploadsOnlyTheFilesThatChanged(t *testing.T) {
	for name, newStore := range stores(t) {
		t.Run(name, func(t *testing.T) {
			src, bs := sourceStorage(t), newStore()
			id, first, err := CreateSavepointWith(ctx, src, bs, "v1", savepoint.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if first.Uploaded != first.Objects || first.UploadedBytes != first.ObjectBytes {
				t.Fatalf("first savepoint %+v: want everything uploaded", first)
			}
			nextCheckpoint(t, src, "w0/sub/deep/OPTIONS", []byte("options, changed"))
			id2, st, err := CreateSavepointWith(ctx, src, bs, "v2", savepoint.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if id2 == id || st.Uploaded != 1 || st.UploadedBytes != int64(len("options, changed")) {
				t.Fatalf("second savepoint of %s: %+v; want only the changed file uploaded", id2, st)
			}
			dst := NewFileStorage(t.TempDir())
			if _, err := RestoreSavepoint(ctx, dst, bs, "v2"); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(treeFiles(t, src.StateDir(id2)), treeFiles(t, dst.StateDir(id2))) {
				t.Fatal("restored state differs")
			}
		})
	}
}

// oldFormat stores checkpoint 2 of src as savepoint label of bs the way
// every savepoint was stored before the savepoint area: one archive.
func oldFormat(t *testing.T, src Storage, bs Blobstore, label string) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := ArchiveCheckpoint(ctx, src, NewID(2), &buf); err != nil {
		t.Fatal(err)
	}
	if err := bs.Put(ctx, SavepointKey(label), bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestAnOldFormatSavepointRestoresCopiesAndExports(t *testing.T) {
	src, bs, to := sourceStorage(t), memstore.New(), memstore.New()
	ar := oldFormat(t, src, bs, "old")
	dst := NewFileStorage(t.TempDir())
	id, err := RestoreSavepoint(ctx, dst, bs, "old")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(treeFiles(t, src.StateDir(id)), treeFiles(t, dst.StateDir(id))) {
		t.Fatal("state restored from the old format differs")
	}
	var out bytes.Buffer
	if err := ExportSavepoint(ctx, bs, "old", &out); err != nil || !bytes.Equal(out.Bytes(), ar) {
		t.Fatalf("export of the old format: %v (same bytes: %v)", err, bytes.Equal(out.Bytes(), ar))
	}
	if err := CopySavepoint(ctx, bs, to, "old"); err != nil {
		t.Fatal(err)
	}
	dst2 := NewFileStorage(t.TempDir())
	if _, err := RestoreSavepoint(ctx, dst2, to, "old"); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(treeFiles(t, src.StateDir(id)), treeFiles(t, dst2.StateDir(id))) {
		t.Fatal("state restored from the copy of the old format differs")
	}
}

func TestExportedSavepointPassesTarAndSha256sum(t *testing.T) {
	tarBin, err := exec.LookPath("tar")
	if err != nil {
		t.Skipf("SKIPPED: no tar command (%v)", err)
	}
	sumBin, err := exec.LookPath("sha256sum")
	if err != nil {
		t.Skipf("SKIPPED: no sha256sum command (%v)", err)
	}
	src, bs := sourceStorage(t), memstore.New()
	if _, err := CreateSavepoint(ctx, src, bs, "new"); err != nil {
		t.Fatal(err)
	}
	oldFormat(t, src, bs, "old")
	for _, label := range []string{"new", "old"} {
		dir := t.TempDir()
		tarFile := filepath.Join(dir, label+".tar")
		f, err := os.Create(tarFile)
		if err != nil {
			t.Fatal(err)
		}
		if err := ExportSavepoint(ctx, bs, label, f); err != nil {
			t.Fatal(err)
		}
		f.Close()
		out := filepath.Join(dir, "x")
		os.Mkdir(out, 0o755)
		run(t, out, tarBin, "-xf", tarFile)
		// The manifest's files as sha256sum -c reads them, as
		// docs/savepoints.md does with jq.
		b, err := os.ReadFile(filepath.Join(out, archive.ManifestName))
		if err != nil {
			t.Fatal(err)
		}
		var m archive.Manifest
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		var sums strings.Builder
		for _, f := range m.Files {
			fmt.Fprintf(&sums, "%s  %s\n", f.SHA256, f.Path)
		}
		os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(sums.String()), 0o644)
		got := run(t, out, sumBin, "-c", filepath.Join(dir, "SHA256SUMS"))
		if n := strings.Count(got, ": OK"); n != len(m.Files) || len(m.Files) < 5 {
			t.Fatalf("%s: sha256sum -c said OK for %d of %d files:\n%s", label, n, len(m.Files), got)
		}
		// A damaged file is caught.
		p := filepath.Join(out, filepath.FromSlash(m.Files[0].Path))
		os.WriteFile(p, []byte("damaged"), 0o644)
		cmd := exec.Command(sumBin, "-c", filepath.Join(dir, "SHA256SUMS"))
		cmd.Dir = out
		if err := cmd.Run(); err == nil {
			t.Fatalf("%s: sha256sum -c accepted a damaged file", label)
		}
	}
}

func run(t *testing.T, dir, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", bin, args, err, out)
	}
	return string(out)
}

func TestImportedSavepointSharesContentAndRestores(t *testing.T) {
	src, from, to := sourceStorage(t), memstore.New(), memstore.New()
	if _, err := CreateSavepoint(ctx, src, from, "v1"); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := ExportSavepoint(ctx, from, "v1", &buf); err != nil {
		t.Fatal(err)
	}
	if err := ImportSavepoint(ctx, to, "v1", bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	if err := ImportSavepoint(ctx, to, "v1", bytes.NewReader(buf.Bytes())); !errors.Is(err, ErrSavepointExists) {
		t.Fatalf("import onto a taken label: %v, want ErrSavepointExists", err)
	}
	st, err := savepoint.Import(ctx, to, "v1-again", bytes.NewReader(buf.Bytes()), savepoint.Options{})
	if err != nil || st.Uploaded != 0 {
		t.Fatalf("a second import of the same archive: %+v, %v; want nothing uploaded", st, err)
	}
	dst := NewFileStorage(t.TempDir())
	id, err := RestoreSavepoint(ctx, dst, to, "v1-again")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(treeFiles(t, src.StateDir(id)), treeFiles(t, dst.StateDir(id))) {
		t.Fatal("state restored from the import differs")
	}
}

// damageContent flips a byte of the content object of savepoint label's
// file holding marker.
func damageContent(t *testing.T, bs Blobstore) {
	t.Helper()
	key := savepoint.ContentKey(digestHex([]byte(marker)))
	if err := bs.Put(ctx, key, strings.NewReader(strings.ToLower(marker))); err != nil {
		t.Fatal(err)
	}
}

func TestDamagedContentFailsRestoreAndCopyChangingNothing(t *testing.T) {
	src, bs, to := sourceStorage(t), memstore.New(), memstore.New()
	if _, err := CreateSavepoint(ctx, src, bs, "v1"); err != nil {
		t.Fatal(err)
	}
	damageContent(t, bs)
	dst := NewFileStorage(t.TempDir())
	if _, err := RestoreSavepoint(ctx, dst, bs, "v1"); !errors.Is(err, archive.ErrCorrupt) {
		t.Fatalf("restore: %v, want ErrCorrupt", err)
	}
	if cp, err := dst.LoadLatestCompleted(ctx); cp != nil || err != nil {
		t.Fatalf("the refused restore left %v, %v", cp, err)
	}
	if err := CopySavepoint(ctx, bs, to, "v1"); !errors.Is(err, archive.ErrCorrupt) {
		t.Fatalf("copy: %v, want ErrCorrupt", err)
	}
	if ok, _ := to.Exists(ctx, SavepointKey("v1")); ok {
		t.Fatal("the refused copy published a manifest")
	}
	if ok, _ := to.Exists(ctx, savepoint.ContentKey(digestHex([]byte(marker)))); ok {
		t.Fatal("the damaged content reached the destination")
	}
	if err := ExportSavepoint(ctx, bs, "v1", &bytes.Buffer{}); !errors.Is(err, archive.ErrCorrupt) {
		t.Fatalf("export: %v, want ErrCorrupt", err)
	}
}

func digestHex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
