package archive

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var updateCorpus = flag.Bool("update-corpus", false, "rewrite testdata/fuzz/FuzzRead from the hostile cases")

// seedArchives are the fuzz seeds: every hostile case and a few good
// archives, by corpus file name.
func seedArchives() map[string][]byte {
	seeds := map[string][]byte{
		"good-plain":  goodArchive(),
		"good-zstd":   zstdOf(goodArchive()),
		"good-padded": append(goodArchive(), make([]byte, 9<<10)...),
	}
	for _, c := range allHostileCases() {
		seeds["hostile-"+corpusName(c.name)] = c.data
	}
	return seeds
}

func corpusName(s string) string {
	return strings.Trim(strings.Map(func(r rune) rune {
		if 'a' <= r && r <= 'z' || '0' <= r && r <= '9' {
			return r
		}
		if 'A' <= r && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return '-'
	}, s), "-")
}

// corpusFile is the go test fuzz v1 encoding of one []byte input.
func corpusFile(data []byte) []byte {
	return fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", data)
}

// TestFuzzCorpusIsUpToDate keeps testdata/fuzz/FuzzRead in step with the
// hostile cases, so that plain `go test` (which runs the files) covers
// every one of them. Run with -update-corpus to rewrite it.
func TestFuzzCorpusIsUpToDate(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzRead")
	for name, data := range seedArchives() {
		p := filepath.Join(dir, name)
		if *updateCorpus {
			mustNoErr(t, os.MkdirAll(dir, 0o755))
			mustNoErr(t, os.WriteFile(p, corpusFile(data), 0o644))
			continue
		}
		got, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(got, corpusFile(data)) {
			t.Errorf("%s is missing or stale (run go test -run TestFuzzCorpusIsUpToDate -update-corpus): %v", p, err)
		}
	}
}

// FuzzRead feeds arbitrary bytes to Read and ExtractDir. Whatever the
// input: no panic; the reader never hands out more bytes than the input
// carries (plain tar) or than MaxExpansion allows (zstd); Read and
// ExtractDir agree; a refused archive leaves the tree byte-identical; an
// accepted one puts exactly its verified files under the destination and
// nothing anywhere else.
func FuzzRead(f *testing.F) {
	for _, data := range seedArchives() {
		f.Add(data)
	}
	lim := Limits{MaxTotalBytes: 1 << 20, MaxFiles: 64, MaxManifestBytes: 64 << 10}
	f.Fuzz(func(t *testing.T, data []byte) {
		ctx := context.Background()
		bound := int64(len(data))
		if isZstd(data) {
			bound = lim.withDefaults().MaxExpansion*bound + ExpansionAllowance
		}
		var got int64
		_, verr := Read(ctx, bytes.NewReader(data), lim, countingFn(bound, &got))
		if verr != nil && !errors.Is(verr, ErrCorrupt) {
			t.Fatalf("Read of an in-memory archive failed other than ErrCorrupt: %v", verr)
		}

		base := t.TempDir()
		before := treeSnapshot(t, base)
		dir := filepath.Join(base, "p", "dest")
		m, err := ExtractDir(ctx, bytes.NewReader(data), dir, lim)
		if err != nil {
			if after := treeSnapshot(t, base); !reflect.DeepEqual(after, before) {
				t.Fatalf("refused extraction changed the tree: %v", after)
			}
			// Paths that pass validation are extractable on Linux, so
			// whatever Read accepts must extract.
			if verr == nil {
				t.Fatalf("ExtractDir refused what Read accepted: %v", err)
			}
			return
		}
		if verr != nil {
			t.Fatalf("ExtractDir accepted what Read refused: %v", verr)
		}

		want := map[string]File{}
		for _, f := range m.Files {
			want[f.Path] = f
		}
		seen := 0
		mustNoErr(t, filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(dir, p)
			if err != nil {
				return err
			}
			if p != base && p != filepath.Dir(dir) && (rel == ".." || strings.HasPrefix(rel, "../")) {
				t.Errorf("written outside the destination: %s", p)
				return nil
			}
			switch {
			case d.IsDir():
				return nil
			case !d.Type().IsRegular():
				t.Errorf("extracted a %s: %s", d.Type(), p)
				return nil
			}
			f, ok := want[filepath.ToSlash(rel)]
			if !ok {
				t.Errorf("extracted a file the manifest does not list: %s", rel)
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != f.SHA256 || int64(len(b)) != f.Size {
				t.Errorf("%s: content does not match the manifest", rel)
			}
			seen++
			return nil
		}))
		if seen != len(m.Files) {
			t.Errorf("extracted %d files, manifest lists %d", seen, len(m.Files))
		}
	})
}
