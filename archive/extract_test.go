package archive

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// treeSnapshot describes everything under base: every entry's type and
// permissions, every file's content digest, every link's target.
func treeSnapshot(t *testing.T, base string) map[string]string {
	t.Helper()
	snap := map[string]string{}
	mustNoErr(t, filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(base, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		desc := fi.Mode().String()
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			desc += " -> " + target
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			desc += " " + hex.EncodeToString(sum[:])
		}
		snap[rel] = desc
		return nil
	}))
	return snap
}

// manyFilesArchive is a valid archive of n files spread over a few
// owners and directories; if badLast, the last file's content does not
// match its digest, so the archive is refused only at its very end.
func manyFilesArchive(n int, badLast bool) []byte {
	var files []File
	var entries []entry
	for i := range n {
		p := fmt.Sprintf("state/op%d/d%d/sub/f%03d", i%3, i%5, i)
		content := bytes.Repeat([]byte{byte('a' + i%26)}, 100+i)
		files = append(files, fileOf(p, content))
		if badLast && i == n-1 {
			content = bytes.ToUpper(content)
		}
		entries = append(entries, reg(p, content))
	}
	return rawTar(append([]entry{reg(ManifestName, manifestOf(files...))}, entries...)...)
}

func TestRefusedExtractionLeavesTreeByteIdentical(t *testing.T) {
	cases := append(hostileCases(), hostileCase{name: "refused at the last file", data: manyFilesArchive(20, true)})
	for _, c := range cases {
		data, lim := c.data, c.lim
		t.Run(c.name, func(t *testing.T) {
			base := t.TempDir()
			mustNoErr(t, os.WriteFile(filepath.Join(base, "keep"), []byte("mine"), 0o600))
			mustNoErr(t, os.Mkdir(filepath.Join(base, "empty"), 0o700))
			mustNoErr(t, os.Symlink("keep", filepath.Join(base, "link")))
			before := treeSnapshot(t, base)
			for _, dest := range []string{
				filepath.Join(base, "new", "parents", "dest"), // parents to create
				filepath.Join(base, "empty"),                  // an existing empty directory
				filepath.Join(base, "dest"),
			} {
				if _, err := ExtractDir(t.Context(), bytes.NewReader(data), dest, lim); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("ExtractDir into %s: got %v, want ErrCorrupt", dest, err)
				}
				if after := treeSnapshot(t, base); !reflect.DeepEqual(after, before) {
					t.Fatalf("ExtractDir into %s changed the tree:\nbefore %v\nafter  %v", dest, before, after)
				}
			}
			root, err := os.OpenRoot(base)
			mustNoErr(t, err)
			defer root.Close()
			for _, name := range []string{"dest", "empty"} {
				if _, err := ExtractRoot(t.Context(), bytes.NewReader(data), root, name, lim); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("ExtractRoot into %s: got %v, want ErrCorrupt", name, err)
				}
				if after := treeSnapshot(t, base); !reflect.DeepEqual(after, before) {
					t.Fatalf("ExtractRoot into %s changed the tree:\nbefore %v\nafter  %v", name, before, after)
				}
			}
		})
	}
}

func TestExtractDirToLongestName(t *testing.T) {
	// A destination name of 255 bytes (the most a file system allows):
	// the staging directory next to it must still have a valid name.
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 255))
	m, err := ExtractDir(t.Context(), bytes.NewReader(goodArchive()), dir, Limits{})
	mustNoErr(t, err)
	if b, err := os.ReadFile(filepath.Join(dir, "state", "op1", "000001.sst")); err != nil || string(b) != "alpha" || len(m.Files) != 2 {
		t.Fatalf("got %q, %v", b, err)
	}
}

func TestNewReaderChecksTheManifestBeforeAnyFile(t *testing.T) {
	// The manifest can be examined, and the archive refused, before a
	// file is read or anything created; a bad file is found only by
	// ReadFiles or Extract.
	data := manyFilesArchive(5, true)
	ar, err := NewReader(t.Context(), bytes.NewReader(data), Limits{})
	mustNoErr(t, err)
	defer ar.Close()
	if n := len(ar.Manifest().Files); n != 5 {
		t.Fatalf("manifest lists %d files, want 5", n)
	}
	if err := ar.ReadFiles(t.Context(), nil); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "f004") {
		t.Fatalf("ReadFiles: got %v, want ErrCorrupt naming the last file", err)
	}
	if err := ar.ReadFiles(t.Context(), nil); err == nil || errors.Is(err, ErrCorrupt) {
		t.Fatalf("second ReadFiles: got %v, want a usage error", err)
	}
}

func TestReaderExtractsIntoRoot(t *testing.T) {
	// The flow the checkpoint layer uses: a Root on the directory that
	// holds the state, the manifest examined first, then Extract into a
	// name inside it.
	base := t.TempDir()
	mustNoErr(t, os.Mkdir(filepath.Join(base, "states"), 0o755))
	root, err := os.OpenRoot(base)
	mustNoErr(t, err)
	defer root.Close()
	ar, err := NewReader(t.Context(), bytes.NewReader(manyFilesArchive(12, false)), Limits{})
	mustNoErr(t, err)
	defer ar.Close()
	mustNoErr(t, ar.Extract(t.Context(), root, filepath.Join("states", "x")))
	for _, f := range ar.Manifest().Files {
		b, err := root.ReadFile(filepath.Join("states", "x", filepath.FromSlash(f.Path)))
		mustNoErr(t, err)
		if fileOf(f.Path, b) != f {
			t.Errorf("%s: content does not match", f.Path)
		}
	}
	ents, err := os.ReadDir(filepath.Join(base, "states"))
	mustNoErr(t, err)
	if len(ents) != 1 {
		t.Errorf("states holds %d entries, want only x (no staging left)", len(ents))
	}
	for _, bad := range []string{"../x", "/abs", "."} {
		ar, err := NewReader(t.Context(), bytes.NewReader(goodArchive()), Limits{})
		mustNoErr(t, err)
		if err := ar.Extract(t.Context(), root, bad); err == nil {
			t.Errorf("Extract into %q succeeded", bad)
		}
		ar.Close()
	}
}

// swapper replaces, once, after a delay, a directory of an extraction
// in progress by a symbolic link to outside (moving the real one to
// base). Varying the delay from round to round moves the swap across the
// whole extraction, from its start to its final rename.
type swapper struct {
	stop    chan struct{}
	wg      sync.WaitGroup
	swapped bool
}

func startSwapper(base, outside string, delay time.Duration, victims func() []string) *swapper {
	s := &swapper{stop: make(chan struct{})}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		select {
		case <-s.stop:
			return
		case <-time.After(delay):
		}
		for n := 0; ; n++ {
			select {
			case <-s.stop:
				return
			default:
			}
			for _, v := range victims() {
				moved := filepath.Join(base, "moved")
				if os.Rename(v, moved) != nil {
					continue
				}
				target := outside // absolute
				if n%2 == 0 {
					target, _ = filepath.Rel(filepath.Dir(v), outside)
				}
				os.Symlink(target, v)
				s.swapped = true
				return
			}
			runtime.Gosched()
		}
	}()
	return s
}

func (s *swapper) finish() bool { close(s.stop); s.wg.Wait(); return s.swapped }

// extractionTime is how long one extraction of data takes here, to
// spread the swaps over it.
func extractionTime(t *testing.T, data []byte) time.Duration {
	start := time.Now()
	_, err := ExtractDir(t.Context(), bytes.NewReader(data), filepath.Join(t.TempDir(), "d"), Limits{})
	mustNoErr(t, err)
	return time.Since(start)
}

// assertNothingOutside fails if anything at all was created in outside.
func assertNothingOutside(t *testing.T, outside string) {
	t.Helper()
	ents, err := os.ReadDir(outside)
	mustNoErr(t, err)
	for _, e := range ents {
		t.Errorf("written outside the destination: %s", filepath.Join(outside, e.Name()))
	}
}

func TestExtractDirRacingSymlinkSwaps(t *testing.T) {
	// While ExtractDir runs, its staging directory and the directories in
	// it are swapped for symbolic links to another directory. Whatever
	// the timing, nothing lands there, and a successful extraction leaves
	// a real directory at the destination.
	data := manyFilesArchive(20, false)
	ok, refused, swaps := 0, 0, 0
	const rounds = 30
	span := extractionTime(t, data) * 3 / 2
	for i := range rounds {
		base := t.TempDir()
		outside, parent := filepath.Join(base, "outside"), filepath.Join(base, "parent")
		mustNoErr(t, os.Mkdir(outside, 0o755))
		mustNoErr(t, os.Mkdir(parent, 0o755))
		dest := filepath.Join(parent, "dest")
		s := startSwapper(base, outside, span*time.Duration(i)/rounds, func() []string {
			ents, _ := os.ReadDir(parent)
			var v []string
			for _, e := range ents {
				if e.IsDir() && strings.HasPrefix(e.Name(), ".dest.tmp-") {
					p := filepath.Join(parent, e.Name())
					// Each round goes for a different level.
					switch i % 3 {
					case 0:
						v = append(v, p)
					case 1:
						v = append(v, filepath.Join(p, "state"))
					case 2:
						v = append(v, filepath.Join(p, "state", "op1"))
					}
				}
			}
			return v
		})
		_, err := ExtractDir(t.Context(), bytes.NewReader(data), dest, Limits{})
		if s.finish() {
			swaps++
		}
		assertNothingOutside(t, outside)
		if err != nil {
			refused++
			continue
		}
		ok++
		if fi, err := os.Lstat(dest); err != nil || !fi.IsDir() {
			t.Fatalf("round %d: extraction succeeded but %s is not a directory (%v, %v)", i, dest, fi.Mode(), err)
		}
	}
	t.Logf("%d rounds, %d swaps during the extraction: %d extractions succeeded, %d refused", rounds, swaps, ok, refused)
}

func TestExtractRootRacingParentSwap(t *testing.T) {
	// The directory the Root was opened on is itself swapped for a link
	// to another directory, again and again: the extraction goes on in
	// the real directory (wherever it was moved) and nothing reaches the
	// other one.
	data := manyFilesArchive(20, false)
	span := extractionTime(t, data)
	for i := range 10 {
		base := t.TempDir()
		outside, parent := filepath.Join(base, "outside"), filepath.Join(base, "parent")
		mustNoErr(t, os.Mkdir(outside, 0o755))
		mustNoErr(t, os.Mkdir(parent, 0o755))
		root, err := os.OpenRoot(parent)
		mustNoErr(t, err)
		s := startSwapper(base, outside, span*time.Duration(i)/10, func() []string { return []string{parent} })
		_, err = ExtractRoot(t.Context(), bytes.NewReader(data), root, "dest", Limits{})
		s.finish()
		assertNothingOutside(t, outside)
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		// The result is where the Root is.
		if _, err := root.Stat(filepath.Join("dest", "state", "op1")); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		root.Close()
	}
}
