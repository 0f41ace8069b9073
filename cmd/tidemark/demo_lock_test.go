package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidemark-io/tidemark/cmd/tidemark/internal/demo"
)

// dirTree describes every file under dir: path, size, mode, mtime and,
// for small files, the content.
func dirTree(t *testing.T, dir string) string {
	t.Helper()
	var sb strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(&sb, "%s %d %v %d", p, fi.Size(), fi.Mode(), fi.ModTime().UnixNano())
		if fi.Mode().IsRegular() && fi.Size() < 256 {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(&sb, " %q", b)
		}
		sb.WriteByte('\n')
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sb.String()
}

// A second demo on the --dir of a running one (its lock held) is refused
// before it changes anything there, naming the holder's pid; once the
// lock is released the same command runs. So is a worker on the dir of
// another worker.
func TestDemoRefusesADirInUse(t *testing.T) {
	dir, store := t.TempDir(), fileURL(t.TempDir())
	// A job that crashed half-way: live state and checkpoints in dir.
	if _, errOut, code := tm(t, "", demoArgs(dir, store, "--crash-after-records", "10000")...); code != exitCrashed {
		t.Fatalf("crashing demo: exit %d\n%s", code, errOut)
	}
	release, err := demo.LockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	before := dirTree(t, dir)
	want := fmt.Sprintf("another tidemark process is using --dir %s (pid %d); wait for it to end or use another --dir", dir, os.Getpid())
	for _, args := range [][]string{demoArgs(dir, store), demoArgs(dir, store, append([]string{"--workers", "2"}, workerArgs...)...)} {
		_, errOut, code := tm(t, "", args...)
		if code != exitError || !strings.Contains(errOut, want) {
			t.Fatalf("tidemark %s on a locked dir: exit %d, want %d saying %q:\n%s", strings.Join(args, " "), code, exitError, want, errOut)
		}
		if after := dirTree(t, dir); after != before {
			t.Fatalf("the refused demo changed its dir:\nbefore:\n%s\nafter:\n%s", before, after)
		}
	}
	_, errOut, code := tm(t, "", "demo", "worker", "--coordinator", freeAddr(t), "--slot", "0", "--dir", dir)
	if code != exitError || !strings.Contains(errOut, want) {
		t.Fatalf("demo worker on a locked dir: exit %d, want %d saying %q:\n%s", code, exitError, want, errOut)
	}
	if after := dirTree(t, dir); after != before {
		t.Fatalf("the refused worker changed its dir:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	release()
	out := must(t, "", demoArgs(dir, store)...)
	if !strings.Contains(out, "exactly-once: OK") {
		t.Fatalf("demo after the lock was released: %q", out)
	}
}
