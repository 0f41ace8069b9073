package archive

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"

	"github.com/klauspost/compress/zstd"
)

// Entry names used in errors for the parts of a stream that are not
// entries.
const (
	startOfArchive = "start of archive"
	endOfArchive   = "end of archive"
)

// Read streams the archive in r, verifying it, and calls fn once for each
// file, in manifest order, with a reader of exactly its content. The size
// and digest are checked as fn reads: if they disagree the reader returns
// an error wrapping ErrCorrupt instead of io.EOF, so fn must treat only
// io.EOF as success (io.Copy does). If fn returns nil without reading to
// EOF, Read drains and checks the rest. The reader is valid only until fn
// returns. A nil fn only verifies.
//
// The manifest is read and checked, including against lim, before fn is
// first called; Read returns it when the whole archive has been verified,
// to the last byte of r. If fn returns an error, Read stops and returns it
// (wrapped, naming the file); if the archive is refused, the error wraps
// ErrCorrupt. Either way, fn may already have been called for earlier
// files: consumers that must not act on a partial archive stage what they
// write (as ExtractDir does). To inspect the manifest before any file is
// read, use NewReader.
func Read(ctx context.Context, r io.Reader, lim Limits, fn func(f File, r io.Reader) error) (*Manifest, error) {
	ar, err := NewReader(ctx, r, lim)
	if err != nil {
		return nil, err
	}
	defer ar.Close()
	if err := ar.ReadFiles(ctx, fn); err != nil {
		return nil, err
	}
	return ar.Manifest(), nil
}

// Verify reads the whole archive in r and checks the manifest, every
// file's size and digest and the end of the stream (nothing may follow
// the archive), writing nothing. It returns the manifest if the archive
// is sound and an error wrapping ErrCorrupt if not. On success every byte
// of r up to io.EOF has been read and checked.
func Verify(ctx context.Context, r io.Reader, lim Limits) (*Manifest, error) {
	return Read(ctx, r, lim, nil)
}

// Reader reads one archive in two steps: NewReader reads and checks the
// manifest, so that a caller can examine it (the record, the layout it
// implies, conflicts at the destination) and refuse before anything is
// read or created; ReadFiles or Extract then reads the files. A Reader is
// used once and from one goroutine.
type Reader struct {
	lim    Limits
	src    *srcReader
	z      *zstdStream // nil for a plain tar
	count  *countingReader
	tr     *tar.Reader
	m      *Manifest
	entry  string // what is being read, for errors of the lower layers
	used   bool
	closed bool
}

// NewReader reads the manifest at the start of r and checks it completely
// (format, record, every path, size and digest, the layout, lim) before
// returning. It reads nothing beyond the manifest. The caller must Close
// the Reader. Errors are classified as for Read.
func NewReader(ctx context.Context, r io.Reader, lim Limits) (*Reader, error) {
	ar := &Reader{lim: lim.withDefaults(), src: &srcReader{r: r}, entry: startOfArchive}
	m, err := ar.open()
	if err != nil {
		ar.Close()
		return nil, ar.classify(ctx, err)
	}
	ar.m = m
	return ar, nil
}

// Manifest returns the archive's manifest, as checked by NewReader.
func (ar *Reader) Manifest() *Manifest { return ar.m }

// Close releases the decoder; it may be called more than once. It does
// not close the underlying reader.
func (ar *Reader) Close() error {
	if ar.z != nil && !ar.closed {
		ar.z.close()
	}
	ar.closed = true
	return nil
}

// ReadFiles reads every file and the end of the archive as Read does,
// calling fn for each file (nil: only verify). It may be called once.
func (ar *Reader) ReadFiles(ctx context.Context, fn func(f File, r io.Reader) error) error {
	if ar.used {
		return errors.New("archive: files already read")
	}
	ar.used = true
	if err := ar.readFiles(ctx, fn); err != nil {
		return ar.classify(ctx, err)
	}
	return nil
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

// countingReader counts the bytes of the tar stream, so that the reader
// can tell how many bytes an entry really occupies.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// classify turns err into what the Reader returns. Cancellation and
// failures of the underlying reader win over whatever the parsers made of
// them, then refusals of the compression layer (named after the entry
// being read), then the parsers' own verdict.
func (ar *Reader) classify(ctx context.Context, err error) error {
	if errors.Is(err, ErrCorrupt) && ar.src.err == nil && (ar.z == nil || ar.z.err == nil) {
		return err
	}
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("archive: read: %w", cerr)
	}
	if ar.src.err != nil {
		return fmt.Errorf("archive: read: %w", ar.src.err)
	}
	if ar.z != nil && ar.z.err != nil {
		return fmt.Errorf("%w: entry %q: %w", ErrCorrupt, ar.entry, ar.z.err)
	}
	return err
}

// parseErr converts an error from the tar or zstd layer into a refusal.
func parseErr(entry string, err error) error {
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return corrupt(entry, "%v", err)
}

func (ar *Reader) open() (*Manifest, error) {
	br := bufio.NewReader(ar.src)
	var stream io.Reader = br
	// Peek fails on inputs shorter than the magic; those are plain tar
	// and will be refused as such.
	magic, _ := br.Peek(16)
	if err := sniff(magic); err != nil {
		return nil, err
	}
	if isZstd(magic) {
		z, err := newZstdStream(br, ar.lim)
		if err != nil {
			return nil, err
		}
		ar.z = z
		stream = z
	}
	ar.count = &countingReader{r: stream}
	ar.tr = tar.NewReader(ar.count)
	ar.entry = ManifestName
	return ar.readManifest()
}

func (ar *Reader) readManifest() (*Manifest, error) {
	hdr, err := ar.tr.Next()
	if err == io.EOF {
		return nil, corrupt(ManifestName, "missing: the archive is empty")
	}
	if err != nil {
		return nil, parseErr(ManifestName, err)
	}
	if hdr.Name != ManifestName {
		return nil, corrupt(hdr.Name, "first entry must be %s", ManifestName)
	}
	if err := checkPlain(hdr); err != nil {
		return nil, err
	}
	if hdr.Size > ar.lim.MaxManifestBytes {
		return nil, tooLarge(ManifestName, "%d bytes, over the %d-byte limit", hdr.Size, ar.lim.MaxManifestBytes)
	}
	// Decoded as it streams: memory follows the bytes actually present,
	// never the size the header declares.
	body := &entryReader{r: ar.tr, count: ar.count, start: ar.count.n, f: File{Path: ManifestName, Size: hdr.Size}}
	m, err := decodeManifest(body, ar.lim)
	if err != nil {
		if !errors.Is(err, ErrCorrupt) {
			err = parseErr(ManifestName, err)
		}
		return nil, err
	}
	if body.n != hdr.Size {
		return nil, corrupt(ManifestName, "%d bytes, header says %d", body.n, hdr.Size)
	}
	return m, nil
}

func (ar *Reader) readFiles(ctx context.Context, fn func(File, io.Reader) error) error {
	files := ar.m.Files
	prev := ManifestName
	for i, f := range files {
		if err := ctx.Err(); err != nil {
			return err
		}
		ar.entry = f.Path
		hdr, err := ar.tr.Next()
		if err == io.EOF {
			return corrupt(f.Path, "listed in the manifest but missing from the archive")
		}
		if err != nil {
			return parseErr(fmt.Sprintf("after %s", prev), err)
		}
		if err := checkEntry(hdr, files, i); err != nil {
			return err
		}
		if err := ar.readFile(ctx, f, fn); err != nil {
			return err
		}
		prev = f.Path
	}

	ar.entry = endOfArchive
	dataEnd := ar.count.n
	hdr, err := ar.tr.Next()
	switch {
	case err == io.EOF:
	case err != nil:
		return parseErr(fmt.Sprintf("after %s", prev), err)
	case hdr.Name == ManifestName || listed(files, hdr.Name) >= 0:
		return corrupt(hdr.Name, "appears twice")
	default:
		return corrupt(hdr.Name, "not listed in the manifest")
	}
	// tar reports the end at a missing header as well as at the marker;
	// a whole archive has the marker: two zero blocks after the last
	// entry's padding.
	if marker := ar.count.n - (dataEnd+511)/512*512; marker != 1024 {
		return corrupt(endOfArchive, "end-of-archive marker missing or cut (%d of 1024 bytes)", marker)
	}
	if err := checkPadding(ar.count); err != nil {
		return err
	}
	if ar.z != nil {
		return ar.z.checkEnd()
	}
	return nil
}

// listed returns the index of the file at path p, or -1; used only to
// explain a refusal, so a linear scan is fine.
func listed(files []File, p string) int {
	for i, f := range files {
		if f.Path == p {
			return i
		}
	}
	return -1
}

// checkPlain refuses every entry that is not a plain regular file whose
// bytes are all in the stream: other types, and sparse files of every
// format (old GNU 'S' entries, PAX GNU.sparse.* records of versions 0.0,
// 0.1 and 1.0), whose holes archive/tar would fill with zeros the stream
// does not carry. entryReader also checks every entry's bytes against the
// stream, so a header that makes the tar reader synthesize data in some
// other way is refused too.
func checkPlain(hdr *tar.Header) error {
	if hdr.Typeflag == tar.TypeGNUSparse {
		return corrupt(hdr.Name, "is a sparse file (GNU format), not a plain regular file")
	}
	for k := range hdr.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return corrupt(hdr.Name, "is a sparse file (PAX record %s), not a plain regular file", k)
		}
	}
	if hdr.Typeflag != tar.TypeReg {
		return corrupt(hdr.Name, "is a %s, not a regular file", typeName(hdr.Typeflag))
	}
	return nil
}

// checkEntry checks that hdr is the i'th file of the manifest.
func checkEntry(hdr *tar.Header, files []File, i int) error {
	f := files[i]
	if hdr.Name != f.Path {
		j := listed(files, hdr.Name)
		switch {
		case hdr.Name == ManifestName:
			return corrupt(hdr.Name, "appears twice")
		case j < 0:
			return corrupt(hdr.Name, "not listed in the manifest")
		case j < i:
			return corrupt(hdr.Name, "appears twice")
		default:
			return corrupt(hdr.Name, "out of manifest order: expected %q", f.Path)
		}
	}
	if err := checkPlain(hdr); err != nil {
		return err
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

func (ar *Reader) readFile(ctx context.Context, f File, fn func(File, io.Reader) error) error {
	er := &entryReader{ctx: ctx, r: ar.tr, count: ar.count, start: ar.count.n, f: f, h: sha256.New()}
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

// entryReader hands out one entry's content and checks it at the end: it
// returns io.EOF only after the size and digest (if h is set) matched f.
// Throughout, it checks that every byte it hands out came from the
// stream: the tar reader must never produce more than it consumed since
// the entry's header. Its errors are sticky.
type entryReader struct {
	ctx   context.Context // nil: not checked (the manifest)
	r     io.Reader       // the tar reader, positioned at the entry
	count *countingReader
	start int64
	f     File
	h     hash.Hash
	n     int64
	err   error
}

func (e *entryReader) Read(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	if e.ctx != nil {
		if err := e.ctx.Err(); err != nil {
			e.err = err
			return 0, err
		}
	}
	n, err := e.r.Read(p)
	e.n += int64(n)
	if carried := e.count.n - e.start; e.n > carried {
		e.err = corrupt(e.f.Path, "the tar reader produced %d bytes, the stream carries %d: synthesized (sparse) data", e.n, carried)
		return 0, e.err
	}
	if e.h != nil {
		e.h.Write(p[:n])
	}
	switch {
	case err == io.EOF:
		// tar ends the entry after exactly the header's size, which
		// checkEntry matched against the manifest; check anyway.
		if e.h == nil {
			break
		}
		if e.n != e.f.Size {
			err = corrupt(e.f.Path, "%d bytes, manifest says %d", e.n, e.f.Size)
		} else if got := hex.EncodeToString(e.h.Sum(nil)); got != e.f.SHA256 {
			err = corrupt(e.f.Path, "sha256 %s, manifest says %s", got, e.f.SHA256)
		}
	case err != nil:
		if !errors.Is(err, ErrCorrupt) {
			err = parseErr(e.f.Path, err)
		}
	}
	e.err = err
	return n, err
}

// checkPadding checks that only zeros follow the end-of-archive marker,
// up to the end of the stream. Tar tools pad to a whole record, whose
// size the writer chooses (GNU tar -b 2048 writes 1 MiB records), so any
// length is accepted. Reading to the end also makes the zstd decoder
// check the rest of its frame; its expansion limit bounds the work.
func checkPadding(c *countingReader) error {
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Read(buf)
		for _, b := range buf[:n] {
			if b != 0 {
				return corrupt(endOfArchive, "data after the end-of-archive marker")
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return parseErr(endOfArchive, err)
		}
	}
}

// newDecoder returns a zstd decoder bounded in memory: one goroutine, a
// window of at most maxZstdWindow.
func newDecoder(r io.Reader) (*zstd.Decoder, error) {
	return zstd.NewReader(r,
		zstd.WithDecoderConcurrency(1), // synchronous: no goroutines, bounded memory
		zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxWindow(maxZstdWindow),
		zstd.WithDecoderMaxMemory(maxZstdWindow),
	)
}
