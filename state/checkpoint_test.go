package state_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tidemark-io/tidemark/state"
)

// model is the expected contents of a Store: owner → key → value.
type model map[string]map[string]string

func (m model) clone() model {
	c := model{}
	for id, kv := range m {
		c[id] = maps.Clone(kv)
	}
	return c
}

func (m model) set(t *testing.T, s *state.Store, id, k, v string) {
	t.Helper()
	if err := owner(t, s, id).Set([]byte(k), []byte(v)); err != nil {
		t.Fatal(err)
	}
	if m[id] == nil {
		m[id] = map[string]string{}
	}
	m[id][k] = v
}

func (m model) del(t *testing.T, s *state.Store, id, k string) {
	t.Helper()
	if err := owner(t, s, id).Delete([]byte(k)); err != nil {
		t.Fatal(err)
	}
	delete(m[id], k)
}

// check asserts that s holds exactly m.
func (m model) check(t *testing.T, s *state.Store) {
	t.Helper()
	if got, want := s.Owners(), slices.Sorted(maps.Keys(m)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("owners = %v, want %v", got, want)
	}
	for id, want := range m {
		got := contents(t, owner(t, s, id))
		if !maps.Equal(got, want) {
			t.Fatalf("owner %s: %d keys, want %d (contents differ)", id, len(got), len(want))
		}
	}
}

// fill writes n generated pairs to owner id.
func (m model) fill(t *testing.T, s *state.Store, id string, seed uint64, n int) {
	t.Helper()
	for i := range n {
		k, v := state.GenerateKV(seed, uint64(i), 100)
		m.set(t, s, id, string(k), string(v))
	}
}

// download copies every file of src into a new directory with plain
// copies, no hard links: what a node with an empty disk has after
// fetching a checkpoint from the object store.
func download(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "downloaded")
	files := listFiles(t, src)
	for _, f := range files {
		to := filepath.Join(dst, filepath.FromSlash(f.RelPath))
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(filepath.Join(src, filepath.FromSlash(f.RelPath)))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// digests maps every file of dir to its SHA-256.
func digests(t *testing.T, dir string) map[string][32]byte {
	t.Helper()
	files := listFiles(t, dir)
	m := map[string][32]byte{}
	for _, f := range files {
		d, size, err := state.DigestFile(t.Context(), filepath.Join(dir, f.RelPath))
		if err != nil {
			t.Fatal(err)
		}
		if size != f.Size {
			t.Fatalf("%s: digested %d bytes, listed %d", f.RelPath, size, f.Size)
		}
		m[f.RelPath] = d
	}
	return m
}

func openCheckpoint(t *testing.T, src string) *state.Store {
	t.Helper()
	s, err := state.OpenCheckpoint(t.Context(), src, filepath.Join(t.TempDir(), "work"), testOptions)
	if err != nil {
		t.Fatalf("OpenCheckpoint(%q): %v", src, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// restore opens a plain copy of checkpoint dir, as a node with an empty
// disk does after downloading it.
func restore(t *testing.T, dir string) *state.Store {
	t.Helper()
	return openCheckpoint(t, download(t, dir))
}

// checkpoint checkpoints s into dir and returns the owner directories.
func checkpoint(t *testing.T, s *state.Store, dir string) map[string]string {
	t.Helper()
	dirs, err := s.Checkpoint(t.Context(), dir)
	if err != nil {
		t.Fatalf("Checkpoint(%q): %v", dir, err)
	}
	return dirs
}

// filledCheckpoint opens a store with opts in a new directory, writes n
// generated pairs (seed 1) to owner "a" and checkpoints it. It returns the
// checkpoint's directory and the model of what it holds.
func filledCheckpoint(t *testing.T, opts state.Options, n int) (string, model) {
	t.Helper()
	root := t.TempDir()
	s, err := state.Open(filepath.Join(root, "live"), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	m := model{}
	m.fill(t, s, "a", 1, n)
	c1 := filepath.Join(root, "ckpt-1")
	checkpoint(t, s, c1)
	return c1, m
}

// listFiles lists the files of dir.
func listFiles(t *testing.T, dir string) []state.FileInfo {
	t.Helper()
	files, err := state.ListFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestCheckpointsRestoreExactlyOnAnEmptyNode(t *testing.T) {
	root := t.TempDir()
	s := openStore(t, filepath.Join(root, "live"))
	m := model{}
	m.fill(t, s, "a", 1, 2000)
	m.fill(t, s, "b", 2, 500)
	m.set(t, s, "b", "empty", "")

	c1 := filepath.Join(root, "ckpt-1")
	dirs := checkpoint(t, s, c1)
	if want := map[string]string{"a": "a", "b": "b"}; !maps.Equal(dirs, want) {
		t.Fatalf("Checkpoint returned %v, want %v", dirs, want)
	}
	want1 := m.clone()

	// Mutate: overwrite, delete, add, and a new owner; some of it flushed,
	// some only in the memtable/WAL when the checkpoint is taken.
	k0, _ := state.GenerateKV(1, 0, 0)
	k1, _ := state.GenerateKV(1, 1, 0)
	m.set(t, s, "a", string(k0), "overwritten")
	m.del(t, s, "a", string(k1))
	m.del(t, s, "b", "empty")
	m.fill(t, s, "c", 3, 300)
	if err := owner(t, s, "c").Flush(); err != nil {
		t.Fatal(err)
	}
	m.set(t, s, "c", "late", "unflushed")

	c2 := filepath.Join(root, "ckpt-2")
	checkpoint(t, s, c2)
	want2 := m.clone()
	m.set(t, s, "a", "after-ckpt-2", "x") // must not appear in either checkpoint

	want1.check(t, restore(t, c1))
	want2.check(t, restore(t, c2))
	m.check(t, s)
}

func TestRestoredStoreKeepsWorkingAndCheckpointing(t *testing.T) {
	c1, m := filledCheckpoint(t, testOptions, 200)

	r := restore(t, c1)
	m.fill(t, r, "a", 9, 200)
	m.del(t, r, "a", func() string { k, _ := state.GenerateKV(1, 5, 0); return string(k) }())
	c2 := filepath.Join(t.TempDir(), "ckpt-2")
	checkpoint(t, r, c2)
	m.check(t, restore(t, c2))
}

func TestSuccessiveCheckpointsShareImmutableSSTs(t *testing.T) {
	root := t.TempDir()
	s := openStore(t, filepath.Join(root, "live"))
	m := model{}
	// Keys in ascending order make SSTs that do not overlap, so Pebble's
	// compactions between the checkpoints are trivial moves that keep the
	// files: the test then always has shared SSTs to compare.
	for i := range 3000 {
		m.set(t, s, "a", fmt.Sprintf("k%08d", i), fmt.Sprintf("value-%d-%0100d", i, i))
	}
	c1, c2 := filepath.Join(root, "ckpt-1"), filepath.Join(root, "ckpt-2")
	checkpoint(t, s, c1)
	for i := range 100 {
		m.set(t, s, "a", fmt.Sprintf("m%08d", i), "later")
	}
	checkpoint(t, s, c2)

	files1 := listFiles(t, c1)
	files2 := listFiles(t, c2)
	d1, d2 := digests(t, c1), digests(t, c2)
	kinds := map[state.FileKind]int{}
	shared := 0
	for _, f := range files1 {
		kinds[f.Kind]++
		if f.Kind != state.Immutable {
			continue
		}
		if filepath.Ext(f.RelPath) != ".sst" {
			t.Errorf("%s classified immutable", f.RelPath)
		}
		d, ok := d2[f.RelPath]
		if !ok {
			continue
		}
		shared++
		if d != d1[f.RelPath] {
			t.Errorf("%s differs between checkpoints", f.RelPath)
		}
		// Hard links: the same inode, not a copy.
		st1, _ := os.Stat(filepath.Join(c1, f.RelPath))
		st2, _ := os.Stat(filepath.Join(c2, f.RelPath))
		if !os.SameFile(st1, st2) {
			t.Errorf("%s is not hard-linked between checkpoints", f.RelPath)
		}
	}
	if shared == 0 {
		t.Fatal("no SST shared between successive checkpoints")
	}
	if kinds[state.Private] == 0 {
		t.Fatal("no private file (MANIFEST, OPTIONS, WAL) in the checkpoint")
	}
	newSSTs := 0
	for _, f := range files2 {
		if f.Kind == state.Immutable {
			if _, ok := d1[f.RelPath]; !ok {
				newSSTs++
			}
		}
		if f.Kind == state.Private && filepath.Ext(f.RelPath) == ".sst" {
			t.Errorf("%s classified private", f.RelPath)
		}
	}
	if newSSTs == 0 {
		t.Fatal("second checkpoint has no new SST: the flush on checkpoint did not happen")
	}
	m.check(t, restore(t, c2))
}

func TestCheckpointAfterFlushHasOnlyATinyWAL(t *testing.T) {
	// Several memtables' worth, so obsolete WALs exist that Pebble would
	// otherwise recycle (and a recycled WAL is as long as its predecessor).
	c1, _ := filledCheckpoint(t, testOptions, 8000)
	files := listFiles(t, c1)
	var private int64
	for _, f := range files {
		if f.Kind == state.Private {
			private += f.Size
		}
	}
	// MANIFEST + OPTIONS + an empty WAL are a few KiB; the data is ~900 KiB.
	if private > 16<<10 {
		t.Fatalf("private files total %d bytes, want < 16 KiB: %v", private, files)
	}
}

func TestCheckpointWithoutFlushKeepsUnflushedWritesInTheWAL(t *testing.T) {
	opts := testOptions
	opts.NoFlushOnCheckpoint = true
	c1, m := filledCheckpoint(t, opts, 100) // well under one memtable: nothing flushed
	files := listFiles(t, c1)
	for _, f := range files {
		if f.Kind == state.Immutable {
			t.Fatalf("checkpoint without flush has SST %s", f.RelPath)
		}
	}
	m.check(t, restore(t, c1))
}

func TestOpenCheckpointLeavesTheCheckpointUnchanged(t *testing.T) {
	c1, m := filledCheckpoint(t, testOptions, 1000)
	before := digests(t, c1)

	r := openCheckpoint(t, c1) // from the checkpoint itself: SSTs hard-linked
	extra := m.clone()
	extra.fill(t, r, "a", 2, 3000)
	for i := range 500 {
		k, _ := state.GenerateKV(1, uint64(i), 0)
		extra.del(t, r, "a", string(k))
	}
	if err := owner(t, r, "a").Flush(); err != nil {
		t.Fatal(err)
	}
	extra.check(t, r)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}

	after := digests(t, c1)
	if !maps.Equal(before, after) {
		t.Fatalf("checkpoint files changed after opening it: before %d files, after %d", len(before), len(after))
	}
	m.check(t, openCheckpoint(t, c1))
}

func TestOpenCheckpointRefusesNonEmptyWorkDir(t *testing.T) {
	root := t.TempDir()
	s := openStore(t, filepath.Join(root, "live"))
	owner(t, s, "a")
	c1 := filepath.Join(root, "ckpt-1")
	checkpoint(t, s, c1)
	work := filepath.Join(root, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "keep"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r, err := state.OpenCheckpoint(t.Context(), c1, work, testOptions); !errors.Is(err, fs.ErrExist) {
		if r != nil {
			_ = r.Close()
		}
		t.Fatalf("OpenCheckpoint into non-empty dir = %v, want fs.ErrExist", err)
	}
	if data, err := os.ReadFile(filepath.Join(work, "keep")); err != nil || string(data) != "mine" {
		t.Fatalf("work dir disturbed: %q, %v", data, err)
	}
}

func TestOpenCheckpointIntoEmptyExistingWorkDir(t *testing.T) {
	root := t.TempDir()
	s := openStore(t, filepath.Join(root, "live"))
	m := model{}
	m.set(t, s, "a", "k", "v")
	c1 := filepath.Join(root, "ckpt-1")
	checkpoint(t, s, c1)
	work := filepath.Join(root, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	r, err := state.OpenCheckpoint(t.Context(), c1, work, testOptions)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	m.check(t, r)
	// No temporary directory is left beside the work dir.
	entries, _ := os.ReadDir(root)
	for _, e := range entries {
		if e.Name() != "live" && e.Name() != "ckpt-1" && e.Name() != "work" {
			t.Errorf("left behind: %s", e.Name())
		}
	}
}

func TestOpenCheckpointRefusesStrayFiles(t *testing.T) {
	for name, setup := range map[string]func(t *testing.T, dir string){
		"file outside owner dirs": func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, "stray"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		},
		"symlink in owner dir": func(t *testing.T, dir string) {
			if err := os.Symlink("/etc/passwd", filepath.Join(dir, "a", "000999.sst")); err != nil {
				t.Fatal(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			s := openStore(t, filepath.Join(root, "live"))
			owner(t, s, "a")
			c1 := filepath.Join(root, "ckpt-1")
			checkpoint(t, s, c1)
			setup(t, c1)
			work := filepath.Join(root, "work")
			r, err := state.OpenCheckpoint(t.Context(), c1, work, testOptions)
			if !errors.Is(err, state.ErrUnsupportedFile) {
				if r != nil {
					_ = r.Close()
				}
				t.Fatalf("OpenCheckpoint = %v, want ErrUnsupportedFile", err)
			}
			if _, err := os.Stat(work); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("work dir exists after refused open: %v", err)
			}
		})
	}
}

func TestCheckpointFailureRemovesPartialOwnerDirs(t *testing.T) {
	root := t.TempDir()
	s := openStore(t, filepath.Join(root, "live"))
	owner(t, s, "a")
	owner(t, s, "b")
	c1 := filepath.Join(root, "ckpt-1")
	// "b" already exists in the destination, so b's checkpoint fails
	// after a's succeeded.
	if err := os.MkdirAll(filepath.Join(c1, "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Checkpoint(t.Context(), c1); err == nil {
		t.Fatal("Checkpoint over an existing owner dir succeeded")
	}
	if _, err := os.Stat(filepath.Join(c1, "a")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("owner a's partial checkpoint left behind: %v", err)
	}
}

func TestCheckpointHonoursCancelledContext(t *testing.T) {
	root := t.TempDir()
	s := openStore(t, filepath.Join(root, "live"))
	owner(t, s, "a")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	c1 := filepath.Join(root, "ckpt-1")
	if _, err := s.Checkpoint(ctx, c1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Checkpoint = %v, want context.Canceled", err)
	}
	if _, err := os.Stat(filepath.Join(c1, "a")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("owner dir created despite cancelled context: %v", err)
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		path string
		want state.FileKind
	}{
		{"000123.sst", state.Immutable},
		{"op-1/000007.sst", state.Immutable},
		{"op-1/000008.blob", state.Immutable},
		{"MANIFEST-000001", state.Private},
		{"OPTIONS-000003", state.Private},
		{"000002.log", state.Private},
		{"marker.format-version.000001.019", state.Private},
		{"marker.manifest.000001.MANIFEST-000001", state.Private},
		{"LOCK", state.Private},
		{"temporary.000004.dbtmp", state.Private},
		{".sst", state.Private},
		{"foo.sst", state.Private},
		{"000001.sst.tmp", state.Private},
	} {
		if got := state.Classify(tc.path); got != tc.want {
			t.Errorf("Classify(%q) = %v, want %v", tc.path, got, tc.want)
		}
	}
}

func TestListFilesRefusesSymlinks(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "000001.sst"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("000001.sst", filepath.Join(dir, "000002.sst")); err != nil {
		t.Fatal(err)
	}
	if _, err := state.ListFiles(dir); !errors.Is(err, state.ErrUnsupportedFile) {
		t.Fatalf("ListFiles = %v, want ErrUnsupportedFile", err)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	if _, err := state.ListFiles(link); !errors.Is(err, state.ErrUnsupportedFile) {
		t.Fatalf("ListFiles(symlink to dir) = %v, want ErrUnsupportedFile", err)
	}
}

func TestListFilesReportsSortedRelativePathsSizesAndKinds(t *testing.T) {
	dir := t.TempDir()
	for p, data := range map[string]string{"b/000002.sst": "22", "a/MANIFEST-000001": "m", "a/000010.sst": "1010"} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := state.ListFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []state.FileInfo{
		{RelPath: "a/000010.sst", Size: 4, Kind: state.Immutable},
		{RelPath: "a/MANIFEST-000001", Size: 1, Kind: state.Private},
		{RelPath: "b/000002.sst", Size: 2, Kind: state.Immutable},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("ListFiles = %v, want %v", got, want)
	}
}

func TestDigestFileHonoursCancelledContext(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, bytes.Repeat([]byte("x"), 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, _, err := state.DigestFile(ctx, p); !errors.Is(err, context.Canceled) {
		t.Fatalf("DigestFile = %v, want context.Canceled", err)
	}
}

func TestCheckpointRefusesADirectoryInsideTheStore(t *testing.T) {
	live := filepath.Join(t.TempDir(), "live")
	s := openStore(t, live)
	owner(t, s, "a")
	for _, dir := range []string{live, filepath.Join(live, "ckpt-1"), filepath.Join(live, "a", "x")} {
		if _, err := s.Checkpoint(t.Context(), dir); !errors.Is(err, fs.ErrInvalid) {
			t.Errorf("Checkpoint(%q) = %v, want fs.ErrInvalid", dir, err)
		}
	}
	if got := s.Owners(); fmt.Sprint(got) != "[a]" {
		t.Fatalf("owners = %v", got)
	}
	if _, err := os.Stat(filepath.Join(live, "ckpt-1")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("checkpoint dir created inside the store: %v", err)
	}
	// A sibling whose name merely starts like the store's is fine.
	if _, err := s.Checkpoint(t.Context(), live+"-ckpt"); err != nil {
		t.Fatalf("Checkpoint(sibling) = %v", err)
	}
}
