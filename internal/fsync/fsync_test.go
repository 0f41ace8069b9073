package fsync_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/tidemark-io/tidemark/internal/fsync"
)

func TestMkdirAllAndTree(t *testing.T) {
	root := t.TempDir()
	deep := filepath.Join(root, "a", "b", "c")
	if err := fsync.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(deep); err != nil || !fi.IsDir() {
		t.Fatalf("MkdirAll did not create %s: %v", deep, err)
	}
	if err := fsync.MkdirAll(deep, 0o755); err != nil {
		t.Fatalf("MkdirAll of an existing dir: %v", err)
	}
	if err := os.WriteFile(filepath.Join(deep, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := fsync.Tree(root); err != nil {
		t.Fatal(err)
	}
}

func TestErrorsNameThePath(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	if err := fsync.Dir(missing); err == nil {
		t.Fatal("Dir of a missing directory succeeded")
	}
	if err := fsync.Tree(missing); err == nil {
		t.Fatal("Tree of a missing directory succeeded")
	}
}
