package archive

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"

	"github.com/klauspost/compress/zstd"
)

// maxZstdWindow bounds the memory a compressed archive can make the
// decoder allocate. Write uses 8 MiB; the zstd CLI uses at most 8 MiB up
// to level 19 and more only with --ultra or --long.
const maxZstdWindow = 64 << 20

// maxTrailing is how many zero bytes may follow the tar end-of-archive
// marker: tar tools pad the stream to their record size (GNU and BSD tar:
// 10 KiB by default).
const maxTrailing = 1 << 20

// Read streams the archive in r, verifying it, and calls fn once for each
// file, in manifest order, with a reader of exactly its content. The size
// and digest are checked as fn reads: if they disagree the reader returns
// an error wrapping ErrCorrupt instead of io.EOF, so fn must treat only
// io.EOF as success (io.Copy does). If fn returns nil without reading to
// EOF, Read drains and checks the rest. The reader is valid only until fn
// returns. A nil fn only verifies.
//
// The manifest is read and checked, including against lim, before fn is
// first called; Read returns it when the whole archive has been verified.
// If fn returns an error, Read stops and returns it (wrapped, naming the
// file); if the archive is refused, the error wraps ErrCorrupt. Either
// way, fn may already have been called for earlier files: consumers that
// must not act on a partial archive stage what they write (as ExtractDir
// does).
func Read(ctx context.Context, r io.Reader, lim Limits, fn func(f File, r io.Reader) error) (*Manifest, error) {
	lim = lim.withDefaults()
	rd := &reader{ctx: ctx, src: &srcReader{r: r}}
	m, err := rd.read(lim, fn)
	if err != nil {
		return nil, rd.classify(err)
	}
	return m, nil
}

// Verify reads the whole archive in r and checks the manifest, every
// file's size and digest and the end of the stream, writing nothing. It
// returns the manifest if the archive is sound and an error wrapping
// ErrCorrupt if not.
func Verify(ctx context.Context, r io.Reader, lim Limits) (*Manifest, error) {
	return Read(ctx, r, lim, nil)
}

// reader holds the state of one Read, so that errors can be classified
// as corruption, cancellation or failure of the underlying reader.
type reader struct {
	ctx context.Context
	src *srcReader
}

// srcReader remembers the first error of the underlying reader other than
// io.EOF: tar and zstd report it (or a consequence of it, such as
// io.ErrUnexpectedEOF) without saying where it came from.
type srcReader struct {
	r   io.Reader
	err error
}

func (s *srcReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF && s.err == nil {
		s.err = err
	}
	return n, err
}

// classify turns err into what Read returns. Cancellation and failures of
// the underlying reader win over whatever the parsers made of them;
// everything else the parsers reject is corruption.
func (rd *reader) classify(err error) error {
	if errors.Is(err, ErrCorrupt) && rd.src.err == nil {
		return err
	}
	if cerr := rd.ctx.Err(); cerr != nil {
		return fmt.Errorf("archive: read: %w", cerr)
	}
	if rd.src.err != nil {
		return fmt.Errorf("archive: read: %w", rd.src.err)
	}
	return err
}

// parseErr converts an error from the tar or zstd layer into a refusal.
// Errors that already carry a verdict (corruption found by us, fn's own
// errors) are passed through; classify sorts out the rest.
func parseErr(entry string, err error) error {
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return corrupt(entry, "%v", err)
}

func (rd *reader) read(lim Limits, fn func(File, io.Reader) error) (*Manifest, error) {
	br := bufio.NewReader(rd.src)
	var stream io.Reader = br
	// Peek fails on inputs shorter than the magic; those are plain tar
	// and will be refused as such.
	if magic, _ := br.Peek(len(zstdMagic)); bytes.Equal(magic, zstdMagic) {
		dec, err := zstd.NewReader(br,
			zstd.WithDecoderConcurrency(1), // synchronous: no goroutines, bounded memory
			zstd.WithDecoderMaxWindow(maxZstdWindow),
			zstd.WithDecoderMaxMemory(maxZstdWindow),
		)
		if err != nil {
			return nil, fmt.Errorf("archive: read: %w", err)
		}
		defer dec.Close()
		stream = dec
	}
	tr := tar.NewReader(stream)

	m, err := rd.readManifest(tr, lim)
	if err != nil {
		return nil, err
	}

	index := make(map[string]int, len(m.Files))
	for i, f := range m.Files {
		index[f.Path] = i
	}
	prev := ManifestName
	for i, f := range m.Files {
		if err := rd.ctx.Err(); err != nil {
			return nil, err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil, corrupt(f.Path, "listed in the manifest but missing from the archive")
		}
		if err != nil {
			return nil, parseErr(fmt.Sprintf("after %s", prev), err)
		}
		if err := checkEntry(hdr, f, i, index); err != nil {
			return nil, err
		}
		if err := rd.readFile(tr, f, fn); err != nil {
			return nil, err
		}
		prev = f.Path
	}

	hdr, err := tr.Next()
	switch {
	case err == io.EOF:
	case err != nil:
		return nil, parseErr(fmt.Sprintf("after %s", prev), err)
	case hdr.Name == ManifestName:
		return nil, corrupt(hdr.Name, "appears twice")
	default:
		if _, ok := index[hdr.Name]; ok {
			return nil, corrupt(hdr.Name, "appears twice")
		}
		return nil, corrupt(hdr.Name, "not listed in the manifest")
	}
	if err := checkTrailer(stream); err != nil {
		return nil, err
	}
	return m, nil
}

func (rd *reader) readManifest(tr *tar.Reader, lim Limits) (*Manifest, error) {
	hdr, err := tr.Next()
	if err == io.EOF {
		return nil, corrupt(ManifestName, "missing: the archive is empty")
	}
	if err != nil {
		return nil, parseErr(ManifestName, err)
	}
	if hdr.Name != ManifestName {
		return nil, corrupt(hdr.Name, "first entry must be %s", ManifestName)
	}
	if hdr.Typeflag != tar.TypeReg {
		return nil, corrupt(ManifestName, "is a %s, not a regular file", typeName(hdr.Typeflag))
	}
	if hdr.Size > lim.MaxManifestBytes {
		return nil, tooLarge(ManifestName, "%d bytes, over the %d-byte limit", hdr.Size, lim.MaxManifestBytes)
	}
	data := make([]byte, hdr.Size)
	if _, err := io.ReadFull(tr, data); err != nil {
		return nil, parseErr(ManifestName, err)
	}

	// Look at the version alone first: a newer archive should be refused
	// for its version, not for a field this reader does not know.
	var v struct {
		Version int `json:"version"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, corrupt(ManifestName, "%v", err)
	}
	if v.Version != FormatVersion {
		return nil, corrupt(ManifestName, "unknown format version %d (this reader knows %d)", v.Version, FormatVersion)
	}
	// The files array is at most as long as the manifest, so checking the
	// count after decoding keeps memory within MaxManifestBytes times a
	// small factor.
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, corrupt(ManifestName, "%v", err)
	}
	if dec.More() {
		return nil, corrupt(ManifestName, "data after the JSON object")
	}
	if len(m.Files) > lim.MaxFiles {
		return nil, tooLarge(ManifestName, "%d files, over the limit of %d", len(m.Files), lim.MaxFiles)
	}
	total, err := validateManifest(&m)
	if err != nil {
		return nil, err
	}
	if total > lim.MaxTotalBytes {
		return nil, tooLarge(ManifestName, "files total %d bytes, over the %d-byte limit", total, lim.MaxTotalBytes)
	}
	return &m, nil
}

// checkEntry checks that hdr is the i'th file of the manifest, f.
func checkEntry(hdr *tar.Header, f File, i int, index map[string]int) error {
	if hdr.Name != f.Path {
		j, listed := index[hdr.Name]
		switch {
		case hdr.Name == ManifestName:
			return corrupt(hdr.Name, "appears twice")
		case !listed:
			return corrupt(hdr.Name, "not listed in the manifest")
		case j < i:
			return corrupt(hdr.Name, "appears twice")
		default:
			return corrupt(hdr.Name, "out of manifest order: expected %q", f.Path)
		}
	}
	if hdr.Typeflag != tar.TypeReg {
		return corrupt(hdr.Name, "is a %s, not a regular file", typeName(hdr.Typeflag))
	}
	if hdr.Size != f.Size {
		return corrupt(hdr.Name, "size %d, manifest says %d", hdr.Size, f.Size)
	}
	return nil
}

func typeName(t byte) string {
	switch t {
	case tar.TypeDir:
		return "directory"
	case tar.TypeSymlink:
		return "symbolic link"
	case tar.TypeLink:
		return "hard link"
	case tar.TypeChar, tar.TypeBlock:
		return "device"
	case tar.TypeFifo:
		return "FIFO"
	default:
		return fmt.Sprintf("entry of type %q", t)
	}
}

func (rd *reader) readFile(tr *tar.Reader, f File, fn func(File, io.Reader) error) error {
	er := &entryReader{ctx: rd.ctx, r: tr, f: f, h: sha256.New()}
	if fn != nil {
		if err := fn(f, er); err != nil {
			// If the reader found the archive at fault, that is the
			// cause, whatever fn made of it.
			if er.err != nil && er.err != io.EOF {
				return er.err
			}
			return fmt.Errorf("archive: read %q: %w", f.Path, err)
		}
	}
	if _, err := io.Copy(io.Discard, er); err != nil {
		return err
	}
	return nil
}

// entryReader hands out one file's content and checks it at the end: it
// returns io.EOF only after the size and digest matched the manifest.
// Its errors are sticky.
type entryReader struct {
	ctx context.Context
	r   io.Reader // the tar reader, positioned at the entry
	f   File
	h   hash.Hash
	n   int64
	err error
}

func (e *entryReader) Read(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	if err := e.ctx.Err(); err != nil {
		e.err = err
		return 0, err
	}
	n, err := e.r.Read(p)
	e.h.Write(p[:n])
	e.n += int64(n)
	switch {
	case err == io.EOF:
		// tar ends the entry after exactly the header's size, which
		// checkEntry matched against the manifest; check anyway.
		if e.n != e.f.Size {
			err = corrupt(e.f.Path, "%d bytes, manifest says %d", e.n, e.f.Size)
		} else if got := hex.EncodeToString(e.h.Sum(nil)); got != e.f.SHA256 {
			err = corrupt(e.f.Path, "sha256 %s, manifest says %s", got, e.f.SHA256)
		}
	case err != nil:
		err = parseErr(e.f.Path, err)
	}
	e.err = err
	return n, err
}

// checkTrailer checks what follows the tar end-of-archive marker: only
// zero padding, then the end of the stream. Reading to the end also makes
// the zstd decoder check the rest of its input, so nothing after the
// archive goes unverified.
func checkTrailer(r io.Reader) error {
	buf := make([]byte, 32<<10)
	var total int
	for {
		n, err := r.Read(buf)
		for _, b := range buf[:n] {
			if b != 0 {
				return corrupt("end of archive", "non-zero data after the end-of-archive marker")
			}
		}
		total += n
		if total > maxTrailing {
			return corrupt("end of archive", "more than %d bytes of padding", maxTrailing)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return corrupt("end of archive", "%v", err)
		}
	}
}
