package archive

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Locate finds every file's content at its offset, so that ranged reads
// of an archive in a store give each file's bytes.
func TestLocateFindsEveryFileContent(t *testing.T) {
	b := writeTestArchive(t, false)
	m, files, err := Locate(context.Background(), bytes.NewReader(b), int64(len(b)), Limits{})
	mustNoErr(t, err)
	if len(files) != len(m.Files) || len(files) == 0 {
		t.Fatalf("Locate found %d files, the manifest lists %d", len(files), len(m.Files))
	}
	for i, f := range files {
		if f.File != m.Files[i] {
			t.Fatalf("file %d: %+v, manifest %+v", i, f.File, m.Files[i])
		}
		sum := sha256.Sum256(b[f.Offset : f.Offset+f.Size])
		if hex.EncodeToString(sum[:]) != f.SHA256 {
			t.Errorf("%s at offset %d: the bytes there do not have its digest", f.Path, f.Offset)
		}
	}
}

func TestLocateRefusesCompressedAndDamagedArchives(t *testing.T) {
	if _, _, err := Locate(context.Background(), bytes.NewReader(writeTestArchive(t, true)), 1<<20, Limits{}); !errors.Is(err, ErrCompressed) {
		t.Errorf("Locate of a compressed archive: %v, want ErrCompressed", err)
	}
	b := writeTestArchive(t, false)
	_, files, err := Locate(context.Background(), bytes.NewReader(b), int64(len(b)), Limits{})
	mustNoErr(t, err)
	last := files[len(files)-1]
	if _, _, err := Locate(context.Background(), bytes.NewReader(b[:last.Offset-512]), last.Offset-512, Limits{}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Locate of an archive cut before its last file: %v, want ErrCorrupt", err)
	}
}

// Headers are read in parallel where one-block headers put them; a
// header that is not there (a PAX record before it, for a long path)
// makes Locate walk the archive instead, with the same result.
func TestLocateReadsHeadersInParallelAndFallsBackForPAX(t *testing.T) {
	for _, name := range []string{"short", strings.Repeat("d", 120)} { // over ustar's 100 bytes: PAX
		dir := filepath.Join(t.TempDir(), "op1")
		mustNoErr(t, os.MkdirAll(dir, 0o755))
		mustNoErr(t, os.WriteFile(filepath.Join(dir, "000001.sst"), bytes.Repeat([]byte("t"), 3000), 0o644))
		mustNoErr(t, os.WriteFile(filepath.Join(dir, name), []byte("content of "+name), 0o644))
		files, err := DirFiles(context.Background(), dir, StatePrefix+"op1")
		mustNoErr(t, err)
		m := &Manifest{Version: FormatVersion, Record: json.RawMessage(testRecord), Files: files}
		var buf bytes.Buffer
		mustNoErr(t, Write(context.Background(), &buf, m, DirOpener(dir, StatePrefix+"op1"), WriteOptions{}))
		b := buf.Bytes()
		_, located, err := Locate(context.Background(), bytes.NewReader(b), int64(len(b)), Limits{})
		mustNoErr(t, err)
		for _, f := range located {
			sum := sha256.Sum256(b[f.Offset : f.Offset+f.Size])
			if hex.EncodeToString(sum[:]) != f.SHA256 {
				t.Errorf("%s at offset %d: the bytes there do not have its digest", f.Path, f.Offset)
			}
		}
		_, parallel, err := locateParallel(context.Background(), bytes.NewReader(b), int64(len(b)), m, located[0].Offset-512)
		if err != nil || parallel != (name == "short") {
			t.Errorf("file %q: parallel path taken %v (err %v), want %v", name, parallel, err, name == "short")
		}
	}
}
