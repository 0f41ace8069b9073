package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tidemark-io/tidemark/archive"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/memstore"
	"github.com/tidemark-io/tidemark/filestore"
)

// stores returns a fresh Blobstore of every kind savepoints are tested on.
func stores(t *testing.T) map[string]func() Blobstore {
	return map[string]func() Blobstore{
		"memstore": func() Blobstore { return memstore.New() },
		"filestore": func() Blobstore {
			fs, err := filestore.New(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return fs
		},
	}
}

const marker = "HELLO-STATE-CONTENT"

// sourceStorage builds a FileStorage holding completed ckpt 1 and 2 and a
// prepared ckpt 3; ckpt 2 has two owners' state dirs with nested and
// larger files.
func sourceStorage(t testing.TB) *FileStorage {
	t.Helper()
	s := NewFileStorage(t.TempDir())
	mustSave(t, s, record(NewID(1), StatusCompleted))
	cp := record(NewID(2), StatusCompleted)
	cp.StateDirs = map[string]string{"w0": "w0", "w1": "nested/w1", "empty": "empty"}
	big := make([]byte, 1<<20+17)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range big {
		big[i] = byte(r.Uint32())
	}
	files := map[string][]byte{
		"w0/MANIFEST-000001":    []byte(marker),
		"w0/000005.sst":         big,
		"w0/sub/deep/OPTIONS":   []byte("opts"),
		"nested/w1/000001.log":  []byte("wal bytes"),
		"nested/w1/zero-length": nil,
	}
	for rel, b := range files {
		p := filepath.Join(s.StateDir(cp.ID), filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(s.StateDir(cp.ID), "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustSave(t, s, cp)
	mustSave(t, s, record(NewID(3), StatusPrepared))
	return s
}

// treeFiles maps every regular file under root (relative, slash) to its
// content, and every directory to nil with a trailing slash.
func treeFiles(t testing.TB, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			out[rel+"/"] = ""
			return nil
		}
		b, err := os.ReadFile(p)
		out[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSavepointRoundTripCopiesEveryStateFileByteForByte(t *testing.T) {
	for name, newStore := range stores(t) {
		t.Run(name, func(t *testing.T) {
			src, bs := sourceStorage(t), newStore()
			id, err := CreateSavepoint(ctx, src, bs, "nightly")
			if err != nil {
				t.Fatal(err)
			}
			if id != NewID(2) {
				t.Fatalf("promoted %s, want the latest completed %s", id, NewID(2))
			}
			dst := NewFileStorage(filepath.Join(t.TempDir(), "restored"))
			got, err := RestoreSavepoint(ctx, dst, bs, "nightly")
			if err != nil {
				t.Fatal(err)
			}
			if got != id {
				t.Fatalf("restored %s, want %s", got, id)
			}
			want, _ := src.LoadSpecific(ctx, id)
			lc, err := dst.LoadLatestCompleted(ctx)
			if err != nil || !reflect.DeepEqual(lc, want) {
				t.Fatalf("LoadLatestCompleted = %+v, %v; want %+v", lc, err, want)
			}
			a, b := treeFiles(t, src.StateDir(id)), treeFiles(t, dst.StateDir(id))
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("state differs:\nsrc %v\ndst %v", keys(a), keys(b))
			}
			if len(a) < 8 {
				t.Fatalf("fixture too small: %v", keys(a))
			}
			// Nothing else was left in dst: no staging directory.
			entries, _ := os.ReadDir(dst.Dir())
			for _, e := range entries {
				if strings.HasPrefix(e.Name(), "extract-") || strings.Contains(e.Name(), ".tmp-") {
					t.Errorf("left behind: %s", e.Name())
				}
			}
		})
	}
}

func keys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }

func TestValidateLabel(t *testing.T) {
	for _, c := range []struct {
		label string
		ok    bool
	}{
		{"nightly", true}, {"v1.2-final_3", true},
		{"", false}, {"a/b", false}, {"../../x", false}, {"..", false}, {".", false},
		{"a\x00b", false}, {"/abs", false}, {"x/", false}, {strings.Repeat("l", 1020), false},
	} {
		err := ValidateLabel(c.label)
		if c.ok != (err == nil) {
			t.Errorf("ValidateLabel(%q) = %v", c.label, err)
		}
		if !c.ok && (!errors.Is(err, ErrInvalidLabel) || !errors.Is(err, blobstore.ErrInvalidKey)) {
			t.Errorf("ValidateLabel(%q) = %v, want ErrInvalidLabel and ErrInvalidKey", c.label, err)
		}
	}
}

func TestSavepointFunctionsRejectInvalidLabelsBeforeIO(t *testing.T) {
	src, bs := sourceStorage(t), memstore.New()
	dst := NewFileStorage(t.TempDir())
	for _, label := range []string{"../../x", "a/b", ""} {
		if _, err := CreateSavepoint(ctx, src, bs, label); !errors.Is(err, ErrInvalidLabel) {
			t.Errorf("CreateSavepoint(%q): %v", label, err)
		}
		if _, err := RestoreSavepoint(ctx, dst, bs, label); !errors.Is(err, ErrInvalidLabel) {
			t.Errorf("RestoreSavepoint(%q): %v", label, err)
		}
		if err := DeleteSavepoint(ctx, bs, label); !errors.Is(err, ErrInvalidLabel) {
			t.Errorf("DeleteSavepoint(%q): %v", label, err)
		}
		if err := CopySavepoint(ctx, bs, memstore.New(), label); !errors.Is(err, ErrInvalidLabel) {
			t.Errorf("CopySavepoint(%q): %v", label, err)
		}
	}
	for range bs.List(ctx, "") {
		t.Fatal("something was written")
	}
}

func TestSavepointKeyAndBlobNotFound(t *testing.T) {
	if got := SavepointKey("nightly"); got != "savepoints/nightly" {
		t.Errorf("SavepointKey = %q", got)
	}
	if ErrBlobNotFound != blobstore.ErrNotFound {
		t.Error("ErrBlobNotFound is not blobstore.ErrNotFound")
	}
}

func TestCreateSavepointWithoutCompletedCheckpointIsErrNoCompleted(t *testing.T) {
	s := NewFileStorage(t.TempDir())
	mustSave(t, s, record(NewID(1), StatusPrepared))
	if _, err := CreateSavepoint(ctx, s, memstore.New(), "x"); !errors.Is(err, ErrNoCompleted) {
		t.Fatalf("err = %v, want ErrNoCompleted", err)
	}
}

func TestCreateSavepointFailingMidwayLeavesNothingVisible(t *testing.T) {
	for name, newStore := range stores(t) {
		t.Run(name, func(t *testing.T) {
			src, bs := sourceStorage(t), newStore()
			// The record names a state dir that does not exist.
			cp, _ := src.LoadSpecific(ctx, NewID(2))
			cp.StateDirs["ghost"] = "ghost"
			mustSave(t, src, cp)
			if _, err := CreateSavepoint(ctx, src, bs, "broken"); err == nil {
				t.Fatal("CreateSavepoint succeeded with a missing state dir")
			}
			if ok, err := bs.Exists(ctx, SavepointKey("broken")); ok || err != nil {
				t.Fatalf("Exists = %v, %v; a failed savepoint became visible", ok, err)
			}
		})
	}
}

func TestRestoreSavepointMissingIsErrBlobNotFound(t *testing.T) {
	_, err := RestoreSavepoint(ctx, NewFileStorage(t.TempDir()), memstore.New(), "none")
	if !errors.Is(err, ErrBlobNotFound) {
		t.Fatalf("err = %v, want ErrBlobNotFound", err)
	}
}

// corruptSavepoint stores a savepoint whose state bytes were altered.
func corruptSavepoint(t *testing.T, bs Blobstore, label string) {
	t.Helper()
	var buf bytes.Buffer
	if err := ArchiveCheckpoint(ctx, sourceStorage(t), NewID(2), &buf); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	i := bytes.Index(b, []byte(marker))
	if i < 0 {
		t.Fatal("marker not found in archive")
	}
	b[i] ^= 0x20
	if err := bs.Put(ctx, SavepointKey(label), bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
}

func TestRestoreCorruptSavepointLeavesDestinationUntouched(t *testing.T) {
	bs := memstore.New()
	corruptSavepoint(t, bs, "bad")
	dir := filepath.Join(t.TempDir(), "dst")
	dst := NewFileStorage(dir)
	_, err := RestoreSavepoint(ctx, dst, bs, "bad")
	if !errors.Is(err, archive.ErrCorrupt) {
		t.Fatalf("err = %v, want archive.ErrCorrupt", err)
	}
	if d, _ := dst.Load(ctx); d != nil {
		t.Fatalf("record %s saved from a corrupt savepoint", d.ID)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 0 {
		t.Fatalf("destination holds %v", entries)
	}
}

// Restoring a savepoint onto a store that has newer checkpoints (a
// rollback) starts a new lineage: the savepoint becomes the latest
// completed checkpoint under a fresh id after every existing one, says
// where it came from, and the newer checkpoints are kept.
func TestRestoreOntoAStoreWithNewerCheckpointsIsARollback(t *testing.T) {
	src, bs := sourceStorage(t), memstore.New()
	orig, err := CreateSavepoint(t.Context(), src, bs, "sp")
	if err != nil {
		t.Fatal(err)
	}
	dst := NewFileStorage(t.TempDir())
	later := NewID(mustParseID(t, orig) + 5)
	mustSave(t, dst, record(later, StatusCompleted))
	id, err := RestoreSavepoint(t.Context(), dst, bs, "sp")
	if err != nil {
		t.Fatalf("rollback: %v", err)
	}
	if want, _ := NextID(later); id != want {
		t.Fatalf("rolled back to %s, want a fresh id after %s (%s)", id, later, want)
	}
	lc, err := dst.LoadLatestCompleted(t.Context())
	if err != nil || lc.ID != id || string(lc.Source[RestoredFromKey]) != orig {
		t.Fatalf("latest completed %+v, %v: want %s restored from %s", lc, err, id, orig)
	}
	origRec, _ := src.LoadSpecific(t.Context(), orig)
	if string(lc.Offsets()) != string(origRec.Offsets()) {
		t.Fatalf("offsets %q, want the savepoint's %q", lc.Offsets(), origRec.Offsets())
	}
	if _, err := dst.LoadSpecific(t.Context(), later); err != nil {
		t.Fatalf("the newer checkpoint %s is gone after the rollback: %v", later, err)
	}
	if trees := treeFiles(t, dst.StateDir(id)); len(trees) == 0 {
		t.Fatal("no state restored under the new id")
	}
}

func mustParseID(t *testing.T, id string) uint64 {
	t.Helper()
	n, err := ParseID(id)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestListAndDeleteSavepoints(t *testing.T) {
	for name, newStore := range stores(t) {
		t.Run(name, func(t *testing.T) {
			src, bs := sourceStorage(t), newStore()
			for _, l := range []string{"b", "a", "c"} {
				if _, err := CreateSavepoint(ctx, src, bs, l); err != nil {
					t.Fatal(err)
				}
			}
			if err := bs.Put(ctx, "savepoints/nested/key", strings.NewReader("x")); err != nil {
				t.Fatal(err)
			}
			if err := bs.Put(ctx, "other", strings.NewReader("x")); err != nil {
				t.Fatal(err)
			}
			got, err := ListSavepoints(ctx, bs)
			if err != nil || !slices.Equal(got, []string{"a", "b", "c"}) {
				t.Fatalf("ListSavepoints = %q, %v", got, err)
			}
			if err := DeleteSavepoint(ctx, bs, "b"); err != nil {
				t.Fatal(err)
			}
			if err := DeleteSavepoint(ctx, bs, "b"); err != nil {
				t.Fatalf("second delete: %v", err)
			}
			got, _ = ListSavepoints(ctx, bs)
			if !slices.Equal(got, []string{"a", "c"}) {
				t.Fatalf("after delete ListSavepoints = %q", got)
			}
		})
	}
}

func TestCopySavepointStreamsAndRestoresFromTheCopy(t *testing.T) {
	src := sourceStorage(t)
	from := memstore.New()
	to, err := filestore.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := CreateSavepoint(ctx, src, from, "sp"); err != nil {
		t.Fatal(err)
	}
	if err := CopySavepoint(ctx, from, to, "sp"); err != nil {
		t.Fatal(err)
	}
	a, _ := from.Get(ctx, SavepointKey("sp"))
	b, _ := to.Get(ctx, SavepointKey("sp"))
	ab, _ := io.ReadAll(a)
	bb, _ := io.ReadAll(b)
	a.Close()
	b.Close()
	if !bytes.Equal(ab, bb) {
		t.Fatal("copy differs from the original")
	}
	dst := NewFileStorage(t.TempDir())
	id, err := RestoreSavepoint(ctx, dst, to, "sp")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(treeFiles(t, src.StateDir(id)), treeFiles(t, dst.StateDir(id))) {
		t.Fatal("state restored from the copy differs")
	}
}

func TestCopyCorruptSavepointFailsAndLeavesNothingInDestination(t *testing.T) {
	for name, newStore := range stores(t) {
		t.Run(name, func(t *testing.T) {
			from, to := memstore.New(), newStore()
			corruptSavepoint(t, from, "bad")
			err := CopySavepoint(ctx, from, to, "bad")
			if !errors.Is(err, archive.ErrCorrupt) {
				t.Fatalf("err = %v, want archive.ErrCorrupt", err)
			}
			if ok, err := to.Exists(ctx, SavepointKey("bad")); ok || err != nil {
				t.Fatalf("Exists = %v, %v; a corrupt copy became visible", ok, err)
			}
		})
	}
}

func TestCopyMissingSavepointIsErrBlobNotFound(t *testing.T) {
	if err := CopySavepoint(ctx, memstore.New(), memstore.New(), "none"); !errors.Is(err, ErrBlobNotFound) {
		t.Fatalf("err = %v", err)
	}
}

func TestArchiveCheckpointRefusesPreparedCheckpoint(t *testing.T) {
	s := sourceStorage(t)
	if err := ArchiveCheckpoint(ctx, s, NewID(3), io.Discard); err == nil {
		t.Fatal("archived a prepared checkpoint")
	}
}

func TestExtractRefusesStateDirsEscapingStateDir(t *testing.T) {
	for _, rel := range []string{"../../x", "/abs", ".."} {
		cp := record(NewID(1), StatusCompleted)
		cp.StateDirs = map[string]string{"w0": rel}
		rec, _ := json.Marshal(cp)
		var buf bytes.Buffer
		m := &archive.Manifest{Version: archive.FormatVersion, Record: rec}
		if err := archive.Write(ctx, &buf, m, nil, archive.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(t.TempDir(), "dst")
		_, err := ExtractCheckpoint(ctx, NewFileStorage(dir), &buf)
		if !errors.Is(err, archive.ErrCorrupt) {
			t.Errorf("StateDirs %q: err = %v, want archive.ErrCorrupt", rel, err)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("StateDirs %q: destination holds %v", rel, entries)
		}
	}
}
