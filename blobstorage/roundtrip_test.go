package blobstorage

import (
	"bytes"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
	"github.com/tidemark-io/tidemark/checkpoint"
)

// segment draws a valid path segment: mostly plain, sometimes odd but
// valid (spaces, dots inside, non-ASCII, a leading dash).
func segment() *rapid.Generator[string] {
	return rapid.OneOf(
		rapid.StringMatching(`[a-z0-9][a-z0-9._-]{0,11}`),
		rapid.SampledFrom([]string{"a b", "x.y.z", "-dash", "ünïcode", "日本", "...a", "a..", "_", "000001.sst", "MANIFEST-000001"}),
	)
}

// Whatever state layout Save accepts — owners, nested and shared-looking
// directories, empty state directories, odd but valid names — becomes a
// savepoint (ArchiveCheckpoint) that ExtractCheckpoint restores byte-exact,
// from a blobstorage.Storage and from a FileStorage alike.
func TestEveryLayoutSaveAcceptsRoundTripsThroughASavepoint(t *testing.T) {
	tmp := t.TempDir()
	n := 0
	tempDir := func() string {
		n++
		d := filepath.Join(tmp, strconv.Itoa(n))
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	rapid.Check(t, func(rt *rapid.T) {
		owners := rapid.SliceOfNDistinct(segment(), 0, 3, rapid.ID[string]).Draw(rt, "owners")
		dirs := map[string]string{}
		files := map[string]map[string]string{} // owner → rel path → content
		for i, o := range owners {
			// Each owner's state dir: one to three segments, distinct per
			// owner by a numbered first segment so none nests in another.
			segs := rapid.SliceOfN(segment(), 0, 2).Draw(rt, "dir-"+o)
			dirs[o] = path.Join(append([]string{"d" + string(rune('0'+i))}, segs...)...)
			files[o] = map[string]string{}
			for _, f := range rapid.SliceOfN(rapid.SliceOfN(segment(), 1, 3), 0, 4).Draw(rt, "files-"+o) {
				files[o][path.Join(f...)] = rapid.StringN(0, 64, -1).Draw(rt, "content")
			}
		}
		ctx := rt.Context()
		bs := newMem()
		src := New(bs, tempDir(), Options{})
		if _, err := src.Acquire(ctx); err != nil {
			rt.Fatal(err)
		}
		id := checkpoint.NewID(1)
		root := src.StateDir(id)
		want := map[string]string{}
		for o, rel := range dirs {
			if err := os.MkdirAll(filepath.Join(root, filepath.FromSlash(rel)), 0o755); err != nil {
				rt.Fatal(err)
			}
			for p, c := range files[o] {
				full := filepath.Join(root, filepath.FromSlash(rel), filepath.FromSlash(p))
				if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
					rt.Skip("a file and a directory of the same name") // not a layout, a drawing artefact
				}
				if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
					rt.Skip("a file and a directory of the same name")
				}
				want[rel+"/"+p] = c
			}
		}
		d := &checkpoint.CheckpointData{ID: id, StateDirs: dirs, Status: checkpoint.StatusCompleted}
		if err := src.Save(ctx, d); err != nil {
			rt.Fatalf("Save refused a valid layout %v: %v", dirs, err)
		}
		for name, dst := range map[string]checkpoint.Storage{
			"FileStorage": checkpoint.NewFileStorage(tempDir()),
			"blobstorage": func() checkpoint.Storage {
				s := New(newMem(), tempDir(), Options{})
				if _, err := s.Acquire(ctx); err != nil {
					rt.Fatal(err)
				}
				return s
			}(),
		} {
			var buf bytes.Buffer
			if err := checkpoint.ArchiveCheckpoint(ctx, src, id, &buf); err != nil {
				rt.Fatalf("ArchiveCheckpoint of a layout Save accepted (%v): %v", dirs, err)
			}
			got, err := checkpoint.ExtractCheckpoint(ctx, dst, &buf)
			if err != nil {
				rt.Fatalf("%s: ExtractCheckpoint of an archive ArchiveCheckpoint wrote (%v): %v", name, dirs, err)
			}
			if err := checkpoint.Materialize(ctx, dst, &checkpoint.CheckpointData{ID: got}); err != nil {
				rt.Fatal(err)
			}
			tree := readTreeT(dst.StateDir(got))
			for k, v := range want {
				if tree[k] != v {
					rt.Fatalf("%s: %s differs after the round trip (%q, want %q)", name, k, tree[k], v)
				}
			}
			if len(tree) != len(want) {
				rt.Fatalf("%s: %d files after the round trip, want %d", name, len(tree), len(want))
			}
			for _, rel := range dirs {
				if fi, err := os.Stat(filepath.Join(dst.StateDir(got), filepath.FromSlash(rel))); err != nil || !fi.IsDir() {
					rt.Fatalf("%s: state dir %q not restored (an empty one must be): %v", name, rel, err)
				}
			}
		}
	})
}

// Layouts no store, OS or archive could carry the same are refused by
// Save before anything is uploaded, with one rule.
func TestSaveRefusesLayoutsThatCannotRoundTrip(t *testing.T) {
	for name, dirs := range map[string]map[string]string{
		"backslash in a state dir": {"op": `a\b`},
		"nested state dirs":        {"a": "x", "b": "x/y"},
		"the same state dir":       {"a": "x", "b": "x"},
		"dot state dir":            {"a": "."},
		"escaping state dir":       {"a": "../x"},
		"owner with a slash":       {"a/b": "x"},
		"empty state dir":          {"a": ""},
	} {
		t.Run(name, func(t *testing.T) {
			bs := newMem()
			s := newWriter(t, bs, Options{})
			id := checkpoint.NewID(1)
			for _, rel := range dirs {
				_ = os.MkdirAll(filepath.Join(s.StateDir(id), filepath.FromSlash(rel)), 0o755)
			}
			err := s.Save(t.Context(), &checkpoint.CheckpointData{ID: id, StateDirs: dirs, Status: checkpoint.StatusCompleted})
			if err == nil {
				t.Fatalf("Save accepted %v", dirs)
			}
			for _, k := range blobstoretest.ListKeys(t, bs, "checkpoints/") {
				t.Errorf("a refused Save uploaded %s", k)
			}
		})
	}
	t.Run("file name with a backslash", func(t *testing.T) {
		bs := newMem()
		s := newWriter(t, bs, Options{})
		id := checkpoint.NewID(1)
		dir := filepath.Join(s.StateDir(id), "op")
		_ = os.MkdirAll(dir, 0o755)
		_ = os.WriteFile(filepath.Join(dir, `a\b`), []byte("x"), 0o644)
		err := s.Save(t.Context(), &checkpoint.CheckpointData{ID: id, StateDirs: map[string]string{"op": "op"}, Status: checkpoint.StatusCompleted})
		if err == nil || !strings.Contains(err.Error(), "backslash") {
			t.Fatalf("Save of a file named a\\b: %v, want a refusal naming the backslash", err)
		}
	})
}

func readTreeT(root string) map[string]string {
	out := map[string]string{}
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, _ := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		out[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	return out
}
