package main

import (
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// storeFiles returns every file under dir with its contents.
func storeFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		out[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A job run with workers, resumed without --workers or with --workers 0,
// is refused before anything is written, saying to resume with
// --workers; a job run in one process, resumed with --workers, is
// refused saying to resume without.
func TestDemoRefusesAJobOfTheOtherShape(t *testing.T) {
	for _, c := range []struct {
		name         string
		first, again []string
		want         string
	}{
		{"workers job without --workers", append([]string{"--workers", "2"}, workerArgs...), nil, "this job runs with workers (owners part-00…part-07"},
		{"workers job with --workers 0", append([]string{"--workers", "2"}, workerArgs...), []string{"--workers", "0"}, "resume with --workers N"},
		{"one-process job with --workers", nil, append([]string{"--workers", "2"}, workerArgs...), "this job runs in one process"},
	} {
		t.Run(c.name, func(t *testing.T) {
			storeDir := t.TempDir()
			store := fileURL(storeDir)
			if _, errOut, code := tm(t, "", demoArgs(t.TempDir(), store, append(c.first, "--crash-after-records", "10000")...)...); code != exitCrashed {
				t.Fatalf("first run: exit %d\n%s", code, errOut)
			}
			before := storeFiles(t, storeDir)
			_, errOut, code := tm(t, "", demoArgs(t.TempDir(), store, c.again...)...)
			if code != exitError || !strings.Contains(errOut, c.want) || strings.Contains(errOut, "state holds") {
				t.Fatalf("resume %v: exit %d, want %d saying %q:\n%s", c.again, code, exitError, c.want, errOut)
			}
			if after := storeFiles(t, storeDir); !maps.Equal(after, before) {
				t.Fatalf("the refused resume changed the store")
			}
		})
	}
}
