package archive

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"
)

// Locate finds every file's content at its offset, so that ranged reads
// of an archive in a store give each file's bytes.
func TestLocateFindsEveryFileContent(t *testing.T) {
	b := writeTestArchive(t, false)
	m, files, err := Locate(context.Background(), bytes.NewReader(b), Limits{})
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
	if _, _, err := Locate(context.Background(), bytes.NewReader(writeTestArchive(t, true)), Limits{}); !errors.Is(err, ErrCompressed) {
		t.Errorf("Locate of a compressed archive: %v, want ErrCompressed", err)
	}
	b := writeTestArchive(t, false)
	_, files, err := Locate(context.Background(), bytes.NewReader(b), Limits{})
	mustNoErr(t, err)
	last := files[len(files)-1]
	if _, _, err := Locate(context.Background(), bytes.NewReader(b[:last.Offset-512]), Limits{}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Locate of an archive cut before its last file: %v, want ErrCorrupt", err)
	}
}
