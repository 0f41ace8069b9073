package archive

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

// Hand-made tar and zstd streams, for inputs archive/tar.Writer and the
// zstd encoder refuse to produce: sparse entries, raw PAX records, RLE
// bombs, skippable frames.

// blockTar builds a tar stream block by block.
type blockTar struct{ bytes.Buffer }

// header writes a 512-byte ustar header; gnu selects the GNU magic (for
// old GNU sparse entries), and edit may change the block before its
// checksum is computed.
func (b *blockTar) header(name string, typ byte, size int64, gnu bool, edit func(h []byte)) {
	h := make([]byte, 512)
	copy(h[0:100], name)
	copy(h[100:108], "0000644\x00")
	copy(h[108:116], "0000000\x00")
	copy(h[116:124], "0000000\x00")
	numField(h[124:136], size)
	copy(h[136:148], "00000000000\x00")
	h[156] = typ
	if gnu {
		copy(h[257:265], "ustar  \x00")
	} else {
		copy(h[257:263], "ustar\x00")
		copy(h[263:265], "00")
	}
	if edit != nil {
		edit(h)
	}
	copy(h[148:156], "        ")
	var sum int
	for _, c := range h {
		sum += int(c)
	}
	copy(h[148:156], fmt.Sprintf("%06o\x00 ", sum))
	b.Write(h)
}

// numField writes v into a numeric header field: octal if it fits,
// else GNU base-256.
func numField(f []byte, v int64) {
	if s := fmt.Sprintf("%0*o\x00", len(f)-1, v); len(s) == len(f) {
		copy(f, s)
		return
	}
	clear(f)
	f[0] = 0x80
	binary.BigEndian.PutUint64(f[len(f)-8:], uint64(v))
}

// data writes p padded to a whole block.
func (b *blockTar) data(p []byte) {
	b.Write(p)
	if r := len(p) % 512; r != 0 {
		b.Write(make([]byte, 512-r))
	}
}

// file writes a plain regular entry.
func (b *blockTar) file(name string, p []byte) {
	b.header(name, '0', int64(len(p)), false, nil)
	b.data(p)
}

// pax writes a PAX extended header ('x') carrying records, which apply to
// the next entry.
func (b *blockTar) pax(records ...string) {
	var body strings.Builder
	for i := 0; i+1 < len(records); i += 2 {
		body.WriteString(paxRecord(records[i], records[i+1]))
	}
	b.header("PaxHeaders/x", 'x', int64(body.Len()), false, nil)
	b.data([]byte(body.String()))
}

// paxRecord formats one PAX record: "<length> <key>=<value>\n", where
// the length counts itself.
func paxRecord(k, v string) string {
	size := len(k) + len(v) + 3
	size += len(strconv.Itoa(size))
	rec := strconv.Itoa(size) + " " + k + "=" + v + "\n"
	if len(rec) != size {
		rec = strconv.Itoa(len(rec)) + " " + k + "=" + v + "\n"
	}
	return rec
}

// end writes the end-of-archive marker.
func (b *blockTar) end() { b.Write(make([]byte, 1024)) }

// bogusDigest is a well-formed digest that matches nothing used here.
var bogusDigest = strings.Repeat("ab", 32)

// sparseArchive is an archive whose only file, state/a/big, is declared
// (in the manifest and in its tar header) as size bytes, stored as a
// sparse entry of the given format carrying 512 bytes of data at its end.
// The archive itself is a few KiB.
func sparseArchive(format string, size int64) []byte {
	const name = "state/a/big"
	var b blockTar
	b.file(ManifestName, manifestOf(File{Path: name, Size: size, SHA256: bogusDigest}))
	data := bytes.Repeat([]byte{'x'}, 512)
	off := size - 512
	switch format {
	case "gnu-old":
		// The map is in the header: offset and length of each data
		// region at 386, the real size at 483.
		b.header(name, 'S', 512, true, func(h []byte) {
			numField(h[386:398], off)
			numField(h[398:410], 512)
			numField(h[483:495], size)
		})
		b.data(data)
	case "pax-0.0":
		b.pax("GNU.sparse.size", fmt.Sprint(size), "GNU.sparse.numblocks", "1",
			"GNU.sparse.offset", fmt.Sprint(off), "GNU.sparse.numbytes", "512")
		b.file(name, data)
	case "pax-0.1":
		b.pax("GNU.sparse.size", fmt.Sprint(size), "GNU.sparse.numblocks", "1",
			"GNU.sparse.map", fmt.Sprintf("%d,512", off))
		b.file(name, data)
	case "pax-1.0":
		b.pax("GNU.sparse.major", "1", "GNU.sparse.minor", "0",
			"GNU.sparse.name", name, "GNU.sparse.realsize", fmt.Sprint(size))
		// The map leads the data, in a block of its own.
		m := []byte(fmt.Sprintf("1\n%d\n512\n", off))
		m = append(m, make([]byte, 512-len(m))...)
		b.file("GNUSparseFile.0/big", append(m, data...))
	default:
		panic(format)
	}
	b.end()
	return b.Bytes()
}

// zstdFrameBuilder writes one zstd frame by hand: raw blocks for given
// bytes, RLE blocks for runs, no checksum.
type zstdFrameBuilder struct {
	bytes.Buffer
	pending []byte // raw bytes not yet written as blocks
}

// newZstdFrame starts a frame whose window descriptor byte is wd (0x38:
// 128 KiB, the largest block).
func newZstdFrame(wd byte) *zstdFrameBuilder {
	z := &zstdFrameBuilder{}
	z.Write(zstdMagic)
	z.WriteByte(0x00) // no content size, not single segment, no checksum, no dictionary
	z.WriteByte(wd)
	return z
}

func (z *zstdFrameBuilder) blockHeader(last bool, typ, size int) {
	h := uint32(size)<<3 | uint32(typ)<<1
	if last {
		h |= 1
	}
	z.WriteByte(byte(h))
	z.WriteByte(byte(h >> 8))
	z.WriteByte(byte(h >> 16))
}

func (z *zstdFrameBuilder) flushRaw(last bool) {
	for len(z.pending) > 0 || last {
		n := min(len(z.pending), 128<<10)
		isLast := last && n == len(z.pending)
		z.blockHeader(isLast, 0, n)
		z.Write(z.pending[:n])
		z.pending = z.pending[n:]
		if isLast {
			return
		}
	}
}

// raw adds bytes to the frame.
func (z *zstdFrameBuilder) raw(p []byte) { z.pending = append(z.pending, p...) }

// run adds n copies of c as RLE blocks: 4 bytes per 128 KiB.
func (z *zstdFrameBuilder) run(c byte, n int64) {
	z.flushRaw(false)
	for n > 0 {
		k := min(n, 128<<10)
		z.blockHeader(false, 1, int(k))
		z.WriteByte(c)
		n -= k
	}
}

// finish writes the last block and returns the frame.
func (z *zstdFrameBuilder) finish() []byte {
	z.flushRaw(true)
	return z.Bytes()
}

// withRaw returns the frame holding p as raw blocks.
func (z *zstdFrameBuilder) withRaw(p []byte) []byte {
	z.raw(p)
	return z.finish()
}

func gzipOf(p []byte) []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write(p)
	w.Close()
	return b.Bytes()
}

func zipOf(p []byte) []byte {
	var b bytes.Buffer
	w := zip.NewWriter(&b)
	f, _ := w.Create("archive.tar")
	f.Write(p)
	w.Close()
	return b.Bytes()
}

// skippableFrame is a zstd skippable frame carrying payload.
func skippableFrame(payload []byte) []byte {
	b := []byte{0x50, 0x2a, 0x4d, 0x18}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(payload)))
	return append(b, payload...)
}

// zeroDigest returns the sha256 of n zero bytes.
func zeroDigest(n int64) string {
	h := sha256.New()
	buf := make([]byte, 1<<20)
	for n > 0 {
		k := min(n, int64(len(buf)))
		h.Write(buf[:k])
		n -= k
	}
	return hex.EncodeToString(h.Sum(nil))
}

// zstdZeroBomb is a zstd archive, valid in every respect, whose one file
// state/a/zeros is size zero bytes, stored as RLE blocks: about 32,000
// times smaller than what it decompresses to.
func zstdZeroBomb(size int64, digest string) []byte {
	f := File{Path: "state/a/zeros", Size: size, SHA256: digest}
	var head blockTar
	head.file(ManifestName, manifestOf(f))
	head.header(f.Path, '0', size, false, nil)
	z := newZstdFrame(0x38)
	z.raw(head.Bytes())
	z.run(0, size+int64(-size&511)+1024) // content, padding, end marker
	return z.finish()
}

// zstdRatioBomb is a zstd archive of about inSize bytes whose one file
// expands about 126 times, just under DefaultMaxExpansion all along: the
// most work a compressed input of that size can cause before it is
// refused (here at the end, by the file's digest).
func zstdRatioBomb(inSize int) []byte {
	const cycle = 1024 + 126<<10 // 1 KiB raw + 126 KiB of RLE zeros per 1,031 bytes of input
	cycles := inSize / (3 + 1024 + 4)
	size := int64(cycles) * cycle
	f := File{Path: "state/a/mixed", Size: size, SHA256: bogusDigest}
	var head blockTar
	head.file(ManifestName, manifestOf(f))
	head.header(f.Path, '0', size, false, nil)
	z := newZstdFrame(0x38)
	z.raw(head.Bytes())
	noise := make([]byte, 1024)
	for i := range noise {
		noise[i] = byte(i*7 + i>>3)
	}
	for range cycles {
		z.raw(noise)
		z.run(0, 126<<10)
	}
	z.run(0, int64(-size&511)+1024)
	return z.finish()
}
