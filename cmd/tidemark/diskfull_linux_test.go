package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// smallFilesystem mounts a tmpfs of size bytes on a new directory and
// unmounts it (by its path, which is ours) at the end. It needs root; a
// machine without the privilege skips, saying so.
func smallFilesystem(t *testing.T, size string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "small")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("SKIPPED: cannot mount a tmpfs to fill (%v): the disk-full test needs root", err)
	}
	t.Cleanup(func() {
		// Lazily: a broken Pebble keeps its files open (see state.ErrBroken).
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// A full local disk ends the job with an error that names the file and
// ENOSPC, never a panic, and the next run resumes once there is space
// (finding 6: 4 of 4 runs died with a panic from Pebble's WAL write).
func TestDemoOnAFullDiskFailsCleanlyAndResumes(t *testing.T) {
	full := smallFilesystem(t, "600k")
	store := fileURL(filepath.Join(t.TempDir(), "store"))
	args := []string{"demo", "--store", store, "--records", "100000", "--words", "100000", "--batch", "1000",
		"--checkpoint-every", "20000", "--interval", "1h", "--slow", "0"}
	out, errOut, code := tm(t, "", append(args, "--dir", filepath.Join(full, "node"))...)
	if code != exitError || !strings.Contains(errOut, "no space left on device") || !strings.Contains(errOut, full) || strings.Contains(errOut, "panic") {
		t.Fatalf("demo on a full disk: exit %d, want %d and an error naming ENOSPC and the path\nstdout: %s\nstderr: %s", code, exitError, out, errOut)
	}
	out, errOut, code = tm(t, "", append(args, "--dir", t.TempDir())...)
	if code != 0 || !strings.Contains(out, "exactly-once: OK") {
		t.Fatalf("demo with space again: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
}
