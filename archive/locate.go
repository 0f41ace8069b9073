package archive

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"golang.org/x/sync/errgroup"
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

// locateWindow is how much of the archive Locate reads at each header it
// expects (a header block, and room for a PAX record), and
// locateParallel how many of those reads are in flight at once.
const (
	locateWindow = 4096
	locateReads  = 32
)

// Locate reads the manifest of a plain (uncompressed) archive of size
// bytes and the tar header of every file, and returns where each file's
// content is: an archive in an object store can then be read file by
// file with ranged reads, without reading it whole. The manifest is
// checked as NewReader checks it, and every header against it (name,
// size, order, a regular file); the content is not read, so no digest is
// checked: a reader of a located file checks what it needs.
//
// Each header is where the manifest's sizes put it when headers are one
// tar block, so the headers are read in parallel, a small read each;
// an archive where that does not hold (a PAX record) is walked header by
// header instead.
func Locate(ctx context.Context, r io.ReaderAt, size int64, lim Limits) (*Manifest, []Located, error) {
	var magic [4]byte
	if _, err := r.ReadAt(magic[:], 0); err != nil {
		return nil, nil, fmt.Errorf("archive: locate: %w", err)
	}
	if bytes.Equal(magic[:], zstdMagic) {
		return nil, nil, ErrCompressed
	}
	ar, err := NewReader(ctx, bufio.NewReaderSize(io.NewSectionReader(r, 0, size), 1<<20), lim)
	if err != nil {
		return nil, nil, err
	}
	m := ar.Manifest()
	ar.Close()
	// Where the first file's header is: after the manifest's.
	sr := io.NewSectionReader(r, 0, size)
	tr := tar.NewReader(sr)
	h, err := tr.Next()
	if err != nil {
		return nil, nil, fmt.Errorf("archive: locate: %w", err)
	}
	pos, _ := sr.Seek(0, io.SeekCurrent)
	first := pos + blocks(h.Size)
	if out, ok, err := locateParallel(ctx, r, size, m, first); err != nil || ok {
		return m, out, err
	}
	out, err := locateSequential(ctx, sr, tr, m)
	return m, out, err
}

// blocks rounds n up to whole tar blocks.
func blocks(n int64) int64 { return (n + 511) / 512 * 512 }

// locateParallel reads each file's header where one-block headers put
// it; ok is false when one is not there.
func locateParallel(ctx context.Context, r io.ReaderAt, size int64, m *Manifest, first int64) ([]Located, bool, error) {
	out := make([]Located, len(m.Files))
	at := first
	for i, f := range m.Files {
		out[i] = Located{File: f, Offset: at + 512}
		at += 512 + blocks(f.Size)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(locateReads)
	misplaced := make([]bool, len(out))
	for i := range out {
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			start := out[i].Offset - 512
			buf := make([]byte, min(locateWindow, size-start))
			if _, err := r.ReadAt(buf, start); err != nil && !errors.Is(err, io.EOF) {
				return fmt.Errorf("archive: locate %s: %w", out[i].Path, err)
			}
			br := bytes.NewReader(buf)
			h, err := tar.NewReader(br).Next()
			// One block read, no more: no PAX record before it.
			consumed := int64(len(buf)) - int64(br.Len())
			misplaced[i] = err != nil || consumed != 512 || h.Typeflag != tar.TypeReg || h.Name != out[i].Path || h.Size != out[i].Size
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, false, err
	}
	for _, bad := range misplaced {
		if bad {
			return nil, false, nil
		}
	}
	return out, true, nil
}

// locateSequential walks the headers after the manifest's one by one,
// seeking past each file's content.
func locateSequential(ctx context.Context, sr *io.SectionReader, tr *tar.Reader, m *Manifest) ([]Located, error) {
	out := make([]Located, 0, len(m.Files))
	for _, f := range m.Files {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		h, err := tr.Next()
		if err != nil {
			return nil, fmt.Errorf("%w: locate %s: %w", ErrCorrupt, f.Path, err)
		}
		if h.Name != f.Path || h.Size != f.Size || h.Typeflag != tar.TypeReg {
			return nil, fmt.Errorf("%w: entry %q (%d bytes, type %q) where the manifest lists %s (%d bytes)", ErrCorrupt, h.Name, h.Size, h.Typeflag, f.Path, f.Size)
		}
		pos, err := sr.Seek(0, io.SeekCurrent)
		if err != nil {
			return nil, fmt.Errorf("archive: locate %s: %w", f.Path, err)
		}
		out = append(out, Located{File: f, Offset: pos})
	}
	return out, nil
}
