package archive

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
)

// ErrCompressed is returned (wrapped) by Locate for a zstd-compressed
// archive: its files have no offsets to read them at.
var ErrCompressed = errors.New("archive: compressed: files cannot be read in place")

// Located is a file of an archive and where its content starts.
type Located struct {
	File
	// Offset is the position of the file's first byte in the archive.
	Offset int64
}

// Locate reads the manifest of a plain (uncompressed) archive and the tar
// header of every file, seeking past their content, and returns where
// each file's content is. An archive in an object store can then be read
// file by file with ranged reads, without reading it whole. The manifest
// is checked as NewReader checks it, and every header against it (name,
// size, order, a regular file); the content is not read, so no digest is
// checked: a reader of a located file checks what it needs.
func Locate(ctx context.Context, r io.ReadSeeker, lim Limits) (*Manifest, []Located, error) {
	var magic [4]byte
	if _, err := io.ReadFull(r, magic[:]); err != nil {
		return nil, nil, fmt.Errorf("archive: locate: %w", err)
	}
	if bytes.Equal(magic[:], zstdMagic) {
		return nil, nil, ErrCompressed
	}
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return nil, nil, fmt.Errorf("archive: locate: %w", err)
	}
	ar, err := NewReader(ctx, r, lim)
	if err != nil {
		return nil, nil, err
	}
	m := ar.Manifest()
	ar.Close()
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return nil, nil, fmt.Errorf("archive: locate: %w", err)
	}
	tr := tar.NewReader(r)
	if _, err := tr.Next(); err != nil { // the manifest
		return nil, nil, fmt.Errorf("archive: locate: %w", err)
	}
	out := make([]Located, 0, len(m.Files))
	for _, f := range m.Files {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		h, err := tr.Next()
		if err != nil {
			return nil, nil, fmt.Errorf("%w: locate %s: %w", ErrCorrupt, f.Path, err)
		}
		if h.Name != f.Path || h.Size != f.Size || h.Typeflag != tar.TypeReg {
			return nil, nil, fmt.Errorf("%w: entry %q (%d bytes, type %q) where the manifest lists %s (%d bytes)", ErrCorrupt, h.Name, h.Size, h.Typeflag, f.Path, f.Size)
		}
		pos, err := r.Seek(0, io.SeekCurrent)
		if err != nil {
			return nil, nil, fmt.Errorf("archive: locate %s: %w", f.Path, err)
		}
		out = append(out, Located{File: f, Offset: pos})
	}
	return m, out, nil
}
