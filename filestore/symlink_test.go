package filestore_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tidemark-io/tidemark/blobstore"
)

// escapeFixture is a store whose root holds a directory symlink and a file
// symlink pointing outside it, at a directory holding a secret.
type escapeFixture struct {
	root, outside string
	secret        string // path of the secret file outside the root
}

func newEscapeFixture(t *testing.T) escapeFixture {
	t.Helper()
	base := t.TempDir()
	f := escapeFixture{root: filepath.Join(base, "root"), outside: filepath.Join(base, "outside")}
	f.secret = filepath.Join(f.outside, "secret")
	for _, d := range []string{f.root, f.outside} {
		if err := os.Mkdir(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(f.secret, []byte("outside"), 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(f.outside, filepath.Join(f.root, "dirlink")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(f.secret, filepath.Join(f.root, "filelink")); err != nil {
		t.Fatal(err)
	}
	return f
}

// checkOutsideUntouched fails unless the outside directory holds exactly
// the secret, unchanged.
func (f escapeFixture) checkOutsideUntouched(t *testing.T) {
	t.Helper()
	if got := tree(t, f.outside); !slices.Equal(got, []string{"secret"}) {
		t.Fatalf("outside directory now holds %q, want [secret]", got)
	}
	if b, err := os.ReadFile(f.secret); err != nil || string(b) != "outside" {
		t.Fatalf("secret is now %q, %v", b, err)
	}
}

func TestSymlinkCannotBeReadOutsideRoot(t *testing.T) {
	f := newEscapeFixture(t)
	s := newStore(t, f.root)
	ctx := t.Context()
	for _, key := range []string{"dirlink/secret", "filelink"} {
		t.Run(key, func(t *testing.T) {
			if rc, err := s.Get(ctx, key); err == nil {
				rc.Close()
				t.Fatal("Get succeeded through a symlink out of the root")
			}
			if _, err := s.GetRange(ctx, key, 0, -1); err == nil {
				t.Fatal("GetRange succeeded through a symlink out of the root")
			}
			if info, err := s.Stat(ctx, key); err == nil {
				t.Fatalf("Stat succeeded through a symlink out of the root: %+v", info)
			}
			if ok, _ := s.Exists(ctx, key); ok {
				t.Fatal("Exists is true through a symlink out of the root")
			}
		})
	}
}

func TestSymlinkCannotBeWrittenOutsideRoot(t *testing.T) {
	f := newEscapeFixture(t)
	s := newStore(t, f.root)
	ctx := t.Context()
	writes := []struct {
		name string
		do   func() error
	}{
		{"Put through dir link", func() error { return s.Put(ctx, "dirlink/new", strings.NewReader("x")) }},
		{"Put through dir link, nested", func() error { return s.Put(ctx, "dirlink/a/b", strings.NewReader("x")) }},
		{"Put over file in dir link", func() error { return s.Put(ctx, "dirlink/secret", strings.NewReader("x")) }},
		{"PutIfAbsent through dir link", func() error {
			_, err := s.PutIfAbsent(ctx, "dirlink/new", strings.NewReader("x"))
			return err
		}},
		{"PutIfMatch through dir link", func() error {
			_, err := s.PutIfMatch(ctx, "dirlink/secret", "any", strings.NewReader("x"))
			return err
		}},
	}
	for _, w := range writes {
		t.Run(w.name, func(t *testing.T) {
			if err := w.do(); err == nil {
				t.Fatal("write through a symlink out of the root succeeded")
			}
			f.checkOutsideUntouched(t)
		})
	}
	// Writing the key "filelink" replaces the link itself with an object;
	// the file it pointed to is not written.
	t.Run("Put over file link", func(t *testing.T) {
		put(t, s, "filelink", "replaced")
		f.checkOutsideUntouched(t)
		if fi, err := os.Lstat(filepath.Join(f.root, "filelink")); err != nil || !fi.Mode().IsRegular() {
			t.Fatalf("filelink is now %v, %v; want a regular file", fi, err)
		}
	})
}

func TestSymlinkCannotBeDeletedOutsideRoot(t *testing.T) {
	f := newEscapeFixture(t)
	s := newStore(t, f.root)
	_ = s.Delete(t.Context(), "dirlink/secret") // an error or nothing, but no deletion outside
	f.checkOutsideUntouched(t)
	if err := s.Delete(t.Context(), "filelink"); err != nil {
		t.Fatalf("Delete filelink: %v", err)
	}
	f.checkOutsideUntouched(t)
}

func TestSymlinkIsNotListed(t *testing.T) {
	f := newEscapeFixture(t)
	s := newStore(t, f.root)
	put(t, s, "real", "x")
	for _, prefix := range []string{"", "dirlink/", "dirlink/s", "file"} {
		var got []string
		for info, err := range s.List(t.Context(), prefix) {
			if err != nil {
				if prefix == "" {
					t.Fatalf("List(%q): %v", prefix, err)
				}
				break // refusing to descend is fine; listing outside is not
			}
			got = append(got, info.Key)
		}
		want := []string(nil)
		if prefix == "" {
			want = []string{"real"}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("List(%q) = %q, want %q", prefix, got, want)
		}
	}
}

func TestInvalidKeysNeverTouchDisk(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "root")
	s := newStore(t, root)
	for _, key := range []string{"../escape", "a/../../escape", "/abs/escape"} {
		if err := s.Put(t.Context(), key, strings.NewReader("x")); !errors.Is(err, blobstore.ErrInvalidKey) {
			t.Fatalf("Put(%q): %v, want ErrInvalidKey", key, err)
		}
	}
	if got := tree(t, base); len(got) != 0 {
		t.Fatalf("invalid keys created %q", got)
	}
}
