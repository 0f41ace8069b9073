package blobstorage

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// PruneLocal removes other checkpoints' state directories and markers and
// what crashed restores left, and keeps keep's and foreign entries.
func TestPruneLocal(t *testing.T) {
	dir := t.TempDir()
	s := New(newMem(), dir, Options{})
	for _, d := range []string{
		"ckpt-00000000000000000001.state/job",
		"ckpt-00000000000000000002.state/job",
		".ckpt-00000000000000000003.state.tmp-123/job", // a crashed restore
		"other",
	} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{
		"ckpt-00000000000000000002.state.boot",
		"ckpt-00000000000000000004.state.boot",        // its directory is gone
		".ckpt-00000000000000000005.state.boot.tmp-9", // a crashed marker write
		"ckpt-00000000000000000002.state/job/MANIFEST",
		"notes.txt",
		".hidden.tmp-1",
	} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PruneLocal("ckpt-00000000000000000002"); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	want := []string{".hidden.tmp-1", "ckpt-00000000000000000002.state", "ckpt-00000000000000000002.state.boot", "notes.txt", "other"}
	if !slices.Equal(got, want) {
		t.Fatalf("after PruneLocal: %v, want %v", got, want)
	}
	if err := s.PruneLocal(""); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "ckpt-00000000000000000002.state")); !os.IsNotExist(err) {
		t.Fatalf("PruneLocal(\"\") kept the state directory: %v", err)
	}
	if err := New(newMem(), filepath.Join(dir, "absent"), Options{}).PruneLocal(""); err != nil {
		t.Fatalf("PruneLocal of a local directory that does not exist: %v", err)
	}
}
