package filestore_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
	"github.com/tidemark-io/tidemark/filestore"
)

func put(t *testing.T, s blobstore.Blobstore, key, body string) {
	t.Helper()
	if err := s.Put(t.Context(), key, strings.NewReader(body)); err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
}

func get(t *testing.T, s blobstore.Blobstore, key string) string {
	t.Helper()
	rc, err := s.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("Get(%q): read: %v", key, err)
	}
	return string(b)
}

// tree returns every path under dir (files and directories), relative and
// slash-separated, so tests can see exactly what is on disk.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			rel, _ := filepath.Rel(dir, p)
			paths = append(paths, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return paths
}

func TestNewDoesNoIO(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "later")
	s := newStore(t, dir)
	ctx := t.Context()
	if _, err := s.Get(ctx, "k"); !errors.Is(err, blobstore.ErrNotFound) {
		t.Fatalf("Get before the directory exists: %v, want ErrNotFound", err)
	}
	if ok, err := s.Exists(ctx, "k"); ok || err != nil {
		t.Fatalf("Exists = %v, %v; want false, nil", ok, err)
	}
	if err := s.Delete(ctx, "k"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if keys := blobstoretest.ListKeys(t, s, ""); len(keys) != 0 {
		t.Fatalf("List = %q", keys)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("reads created the directory: stat err = %v", err)
	}
	put(t, s, "k", "v")
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("first write did not create the directory: %v", err)
	}
}

func TestNewMakesDirAbsolute(t *testing.T) {
	t.Chdir(t.TempDir())
	s := newStore(t, "rel/dir")
	if !filepath.IsAbs(s.Dir()) || !strings.HasSuffix(s.Dir(), filepath.FromSlash("/rel/dir")) {
		t.Fatalf("Dir() = %q, want an absolute path ending in rel/dir", s.Dir())
	}
	put(t, s, "k", "v")
	t.Chdir(os.TempDir()) // a later working directory must not matter
	if got := get(t, s, "k"); got != "v" {
		t.Fatalf("Get = %q", got)
	}
}

func TestKeyIsFileUnderRoot(t *testing.T) {
	dir := t.TempDir()
	s := newStore(t, dir)
	put(t, s, "a/b/c", "hello")
	b, err := os.ReadFile(filepath.Join(dir, "a", "b", "c"))
	if err != nil || string(b) != "hello" {
		t.Fatalf("file a/b/c = %q, %v; want hello", b, err)
	}
}

func TestKeyConflicts(t *testing.T) {
	ctx := t.Context()
	s := newStore(t, t.TempDir())
	put(t, s, "file", "1")
	put(t, s, "dir/child", "2")
	for _, tc := range []struct {
		name string
		op   func() error
		want error
	}{
		{"Put under a key", func() error { return s.Put(ctx, "file/child", strings.NewReader("x")) }, filestore.ErrKeyConflict},
		{"Put on a directory of keys", func() error { return s.Put(ctx, "dir", strings.NewReader("x")) }, filestore.ErrKeyConflict},
		{"PutIfAbsent under a key", func() error {
			_, err := s.PutIfAbsent(ctx, "file/child", strings.NewReader("x"))
			return err
		}, filestore.ErrKeyConflict},
		{"PutIfAbsent on a directory of keys", func() error {
			_, err := s.PutIfAbsent(ctx, "dir", strings.NewReader("x"))
			return err
		}, filestore.ErrKeyConflict},
		{"PutIfMatch on a directory of keys", func() error {
			_, err := s.PutIfMatch(ctx, "dir", "etag", strings.NewReader("x"))
			return err
		}, blobstore.ErrPreconditionFailed},
		{"Get a directory of keys", func() error { _, err := s.Get(ctx, "dir"); return err }, blobstore.ErrNotFound},
		{"Stat a directory of keys", func() error { _, err := s.Stat(ctx, "dir"); return err }, blobstore.ErrNotFound},
		{"Get under a key", func() error { _, err := s.Get(ctx, "file/child"); return err }, blobstore.ErrNotFound},
		{"Delete a directory of keys", func() error { return s.Delete(ctx, "dir") }, nil},
		{"Delete under a key", func() error { return s.Delete(ctx, "file/child") }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.op(); !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
	if got := blobstoretest.ListKeys(t, s, ""); !slices.Equal(got, []string{"dir/child", "file"}) {
		t.Fatalf("List after conflicts = %q", got)
	}
	if get(t, s, "file") != "1" || get(t, s, "dir/child") != "2" {
		t.Fatal("a conflicting write changed an existing object")
	}
}

// failAfter returns some bytes, then an error.
type failAfter struct{ n int }

func (f *failAfter) Read(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, errors.New("reader failed on purpose")
	}
	n := min(len(p), f.n)
	f.n -= n
	return n, nil
}

func TestFailedPutLeavesNothingOnDisk(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write func(s *filestore.Store, ctx context.Context, key string, r io.Reader) error
	}{
		{"Put", func(s *filestore.Store, ctx context.Context, key string, r io.Reader) error {
			return s.Put(ctx, key, r)
		}},
		{"PutIfAbsent", func(s *filestore.Store, ctx context.Context, key string, r io.Reader) error {
			_, err := s.PutIfAbsent(ctx, key, r)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := newStore(t, dir)
			put(t, s, "keep", "old")
			before := tree(t, dir)
			if err := tc.write(s, t.Context(), "new/deep/key", &failAfter{n: 3 << 20}); err == nil {
				t.Fatal("write with a failing reader succeeded")
			}
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			if err := tc.write(s, ctx, "keep", strings.NewReader("new")); !errors.Is(err, context.Canceled) {
				t.Fatalf("write with a cancelled context: %v, want context.Canceled", err)
			}
			if after := tree(t, dir); !slices.Equal(after, before) {
				t.Fatalf("failed writes left %q on disk, want %q", after, before)
			}
		})
	}
}

func TestConditionalWriteRefusedLeavesNothingOnDisk(t *testing.T) {
	dir := t.TempDir()
	s := newStore(t, dir)
	etag, err := s.PutIfAbsent(t.Context(), "d/k", strings.NewReader("v1"))
	if err != nil {
		t.Fatal(err)
	}
	before := tree(t, dir)
	if _, err := s.PutIfAbsent(t.Context(), "d/k", strings.NewReader("v2")); !errors.Is(err, blobstore.ErrPreconditionFailed) {
		t.Fatalf("PutIfAbsent on present key: %v", err)
	}
	if _, err := s.PutIfMatch(t.Context(), "d/k", etag+"x", strings.NewReader("v2")); !errors.Is(err, blobstore.ErrPreconditionFailed) {
		t.Fatalf("PutIfMatch with a wrong ETag: %v", err)
	}
	if after := tree(t, dir); !slices.Equal(after, before) {
		t.Fatalf("refused writes left %q on disk, want %q", after, before)
	}
}

func TestTempAndForeignFilesAreNotListed(t *testing.T) {
	dir := t.TempDir()
	s := newStore(t, dir)
	put(t, s, "d/k", "v")
	for _, name := range []string{
		".tidemark-tmp-0123456789abcdef\x7f", // a temporary file left by a crash
		"ctl\x01char",                        // no key has control characters
		"bad\x02",
		"\xff\xfe", // nor invalid UTF-8
	} {
		if err := os.WriteFile(filepath.Join(dir, "d", name), []byte("x"), 0o666); err != nil {
			t.Fatal(err)
		}
	}
	if got := blobstoretest.ListKeys(t, s, ""); !slices.Equal(got, []string{"d/k"}) {
		t.Fatalf("List = %q, want [d/k]", got)
	}
}

func TestDeleteRemovesEmptyDirectories(t *testing.T) {
	dir := t.TempDir()
	s := newStore(t, dir)
	put(t, s, "a/b/c/k", "1")
	put(t, s, "a/x", "2")
	if err := s.Delete(t.Context(), "a/b/c/k"); err != nil {
		t.Fatal(err)
	}
	if got := tree(t, dir); !slices.Equal(got, []string{"a", "a/x"}) {
		t.Fatalf("after Delete the tree is %q, want [a a/x]", got)
	}
	if err := s.Delete(t.Context(), "a/x"); err != nil {
		t.Fatal(err)
	}
	if got := tree(t, dir); len(got) != 0 {
		t.Fatalf("after deleting everything the tree is %q", got)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("Delete removed the root: %v", err)
	}
}

func TestPutRacingDeleteInOneDirectory(t *testing.T) {
	// Delete removes directories it leaves empty; a Put into the same
	// directory at that moment must start over, not fail.
	s := newStore(t, t.TempDir())
	ctx := t.Context()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 4 {
		wg.Go(func() {
			key := "x/y/z/k" + string(rune('0'+g))
			for range 100 {
				if err := s.Put(ctx, key, strings.NewReader("v")); err != nil {
					errs <- err
					return
				}
				if err := s.Delete(ctx, key); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestETagChangesOnEveryWriteOfSameSize(t *testing.T) {
	// Same size, written back to back: inode numbers get recycled and the
	// kernel's timestamps are coarse, so this is where an ETag made of
	// (inode, size, kernel times) alone could repeat.
	s := newStore(t, t.TempDir())
	ctx := t.Context()
	first, err := s.PutIfAbsent(ctx, "k", strings.NewReader("v0"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{first: 0}
	for i := 1; i <= 300; i++ {
		put(t, s, "k", "v"+string(rune('0'+i%10)))
		info, err := s.Stat(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if j, dup := seen[info.ETag]; dup {
			t.Fatalf("write %d has the ETag %q of write %d", i, info.ETag, j)
		}
		seen[info.ETag] = i
	}
	if _, err := s.PutIfMatch(ctx, "k", first, strings.NewReader("stale")); !errors.Is(err, blobstore.ErrPreconditionFailed) {
		t.Fatalf("PutIfMatch with the first ETag after 300 writes: %v", err)
	}
}

func TestListAndStatAgreeOnETag(t *testing.T) {
	s := newStore(t, t.TempDir())
	put(t, s, "p/1", "a")
	put(t, s, "p/2", "bb")
	for info, err := range s.List(t.Context(), "p/") {
		if err != nil {
			t.Fatal(err)
		}
		st, err := s.Stat(t.Context(), info.Key)
		if err != nil {
			t.Fatal(err)
		}
		if st != info {
			t.Fatalf("List says %+v, Stat says %+v", info, st)
		}
	}
}

func TestGetReaderSeesVersionItOpened(t *testing.T) {
	s := newStore(t, t.TempDir())
	put(t, s, "k", "old")
	rc, err := s.Get(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	put(t, s, "k", "new!")
	if err := s.Delete(t.Context(), "k"); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(rc)
	if err != nil || !bytes.Equal(b, []byte("old")) {
		t.Fatalf("reader opened before overwrite read %q, %v; want old", b, err)
	}
}

func TestGetReaderFailsAfterCancel(t *testing.T) {
	s := newStore(t, t.TempDir())
	put(t, s, "k", "data")
	ctx, cancel := context.WithCancel(t.Context())
	rc, err := s.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	cancel()
	if _, err := io.ReadAll(rc); !errors.Is(err, context.Canceled) {
		t.Fatalf("read after cancel: %v, want context.Canceled", err)
	}
}

func TestGetRangeNegativeOffset(t *testing.T) {
	s := newStore(t, t.TempDir())
	put(t, s, "k", "data")
	if _, err := s.GetRange(t.Context(), "k", -1, 2); err == nil {
		t.Fatal("GetRange with a negative offset succeeded")
	}
}

func TestListStopsWhenContextIsDone(t *testing.T) {
	s := newStore(t, t.TempDir())
	for _, k := range []string{"a", "b", "c"} {
		put(t, s, k, "v")
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var keys []string
	var gotErr error
	for info, err := range s.List(ctx, "") {
		if err != nil {
			gotErr = err
			break
		}
		keys = append(keys, info.Key)
		cancel()
	}
	if !slices.Equal(keys, []string{"a"}) || !errors.Is(gotErr, context.Canceled) {
		t.Fatalf("List after cancel yielded %q then %v; want [a] then context.Canceled", keys, gotErr)
	}
}

func TestMustExistTellsAMissingStoreFromAnEmptyOne(t *testing.T) {
	// Finding 13: `tidemark ls --store file:///path/that/does/not/exist`
	// printed "no checkpoints": a typo looked like an empty store.
	missing := filepath.Join(t.TempDir(), "no", "such", "store")
	s, err := filestore.NewWithOptions(missing, filestore.Options{MustExist: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	var listErr error
	for _, err := range s.List(ctx, "") {
		listErr = err
	}
	_, getErr := s.Get(ctx, "k")
	_, statErr := s.Stat(ctx, "k")
	_, existsErr := s.Exists(ctx, "k")
	for name, err := range map[string]error{
		"List": listErr, "Get": getErr, "Stat": statErr, "Exists": existsErr,
		"Put":    s.Put(ctx, "k", strings.NewReader("x")),
		"Delete": s.Delete(ctx, "k"),
	} {
		if !errors.Is(err, filestore.ErrStoreNotFound) {
			t.Errorf("%s on a missing root: got %v, want ErrStoreNotFound", name, err)
		} else if !strings.Contains(err.Error(), missing) {
			t.Errorf("%s: error does not name the directory: %v", name, err)
		}
	}
	if _, err := os.Stat(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a MustExist store created its root: %v", err)
	}
	// An existing, empty root is an empty store.
	empty := t.TempDir()
	s, err = filestore.NewWithOptions(empty, filestore.Options{MustExist: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range s.List(ctx, "") {
		t.Fatalf("List of an empty store: %v", err)
	}
	if _, err := s.Get(ctx, "k"); !errors.Is(err, blobstore.ErrNotFound) {
		t.Fatalf("Get in an empty store: %v, want ErrNotFound", err)
	}
	// Without MustExist a missing root stays an empty store, which the
	// first write creates.
	lenient := newStore(t, missing)
	for _, err := range lenient.List(ctx, "") {
		t.Fatalf("List of a missing root without MustExist: %v", err)
	}
}

// DeleteIfMatch deletes only the object whose ETag it names: a writer
// that replaced the object since it was read keeps its object.
func TestDeleteIfMatch(t *testing.T) {
	ctx := t.Context()
	s := newStore(t, t.TempDir())
	old, err := s.PutIfAbsent(ctx, "a/rec", strings.NewReader("old"))
	if err != nil {
		t.Fatal(err)
	}
	cur, err := s.PutIfMatch(ctx, "a/rec", old, strings.NewReader("new"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteIfMatch(ctx, "a/rec", old); !errors.Is(err, blobstore.ErrPreconditionFailed) {
		t.Fatalf("DeleteIfMatch(stale ETag) = %v, want ErrPreconditionFailed", err)
	}
	if ok, err := s.Exists(ctx, "a/rec"); err != nil || !ok {
		t.Fatalf("after a refused DeleteIfMatch: exists %v, %v", ok, err)
	}
	if err := s.DeleteIfMatch(ctx, "a/rec", cur); err != nil {
		t.Fatalf("DeleteIfMatch(current ETag): %v", err)
	}
	if ok, err := s.Exists(ctx, "a/rec"); err != nil || ok {
		t.Fatalf("after DeleteIfMatch: exists %v, %v", ok, err)
	}
	if err := s.DeleteIfMatch(ctx, "a/rec", cur); !errors.Is(err, blobstore.ErrNotFound) {
		t.Fatalf("DeleteIfMatch of a missing key = %v, want ErrNotFound", err)
	}
	if err := s.DeleteIfMatch(ctx, "a", cur); !errors.Is(err, blobstore.ErrNotFound) {
		t.Fatalf("DeleteIfMatch of a directory of keys = %v, want ErrNotFound", err)
	}
	if _, ok := blobstore.As[blobstore.ConditionalDeleter](s); !ok {
		t.Fatal("As[ConditionalDeleter] does not find the file store's")
	}
}

// A directory removed after a listing opened it (GC deleting a checkpoint
// beside a List) lists as empty, not as an error.
func TestListOfADirectoryRemovedMidWalkIsEmpty(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ckpt")
	if err := os.MkdirAll(filepath.Join(dir, "private"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	n, err := filestore.ReadEntriesOfRemoved(dir)
	if err != nil || n != 0 {
		t.Fatalf("read a removed directory: %d entries, %v; want none and no error", n, err)
	}
}
