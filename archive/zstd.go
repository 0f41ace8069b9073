package archive

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"

	"github.com/klauspost/compress/zstd"
)

// maxZstdWindow bounds the memory a compressed archive can make the
// decoder allocate (its history window). Write uses 8 MiB, as does the
// zstd command line up to level 19; larger windows need --ultra or --long.
const maxZstdWindow = 8 << 20

// zstdMagic starts every zstd frame.
var zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

func isZstd(b []byte) bool { return bytes.HasPrefix(b, zstdMagic) }

// isSkippable reports whether b starts a zstd skippable frame (magic
// 0x184D2A50 to 0x184D2A5F): data a zstd decoder silently passes over.
func isSkippable(b []byte) bool {
	return len(b) >= 4 && b[0]&0xf0 == 0x50 && b[1] == 0x2a && b[2] == 0x4d && b[3] == 0x18
}

// compressedFormats are the magic numbers of compressed formats this
// package does not read, so that a refusal says what the input is rather
// than "invalid tar header". A tar archive of ours starts with the name
// MANIFEST.json, so none of these can be one.
var compressedFormats = []struct {
	magic, name string
}{
	{"\x1f\x8b", "gzip-compressed"},
	{"BZh", "bzip2-compressed"},
	{"\xfd7zXZ\x00", "xz-compressed"},
	{"\x5d\x00\x00", "lzma-compressed"},
	{"\x04\x22\x4d\x18", "lz4-compressed"},
	{"\x02\x21\x4c\x18", "lz4-compressed (legacy format)"},
	{"\x1f\x9d", "compress(1)-compressed"},
	{"LZIP", "lzip-compressed"},
	{"\xff\x06\x00\x00sNaPpY", "snappy-compressed"},
	{"PK\x03\x04", "a zip file"},
	{"PK\x05\x06", "a zip file"},
	{"PK\x07\x08", "a zip file"},
	{"7z\xbc\xaf\x27\x1c", "a 7-zip file"},
}

// sniff refuses an input that starts like something other than a plain
// tar or a zstd frame.
func sniff(b []byte) error {
	if isSkippable(b) {
		return corrupt(startOfArchive, "archive starts with a zstd skippable frame; Tidemark reads plain tar or one zstd frame")
	}
	for _, f := range compressedFormats {
		if bytes.HasPrefix(b, []byte(f.magic)) {
			return corrupt(startOfArchive, "archive is %s; Tidemark reads plain tar or zstd", f.name)
		}
	}
	return nil
}

// zstdStream decompresses exactly one zstd frame and enforces
// Limits.MaxExpansion on it. A frame walker (zstdFrame) sits between the
// input and the decoder: it hands the decoder the bytes of the first
// frame and then io.EOF, so that the decoder can neither skip a skippable
// frame nor run on into a second frame or garbage; checkEnd then refuses
// anything after the frame. The walker also refuses, from the frame
// header and before the decoder allocates anything, windows over
// maxZstdWindow and dictionaries.
type zstdStream struct {
	frame *zstdFrame
	dec   *zstd.Decoder
	lim   Limits
	out   int64 // decompressed bytes produced
	err   error // refusal by this layer; sticky
}

func newZstdStream(br *bufio.Reader, lim Limits) (*zstdStream, error) {
	z := &zstdStream{lim: lim}
	z.frame = &zstdFrame{br: br, stream: z}
	dec, err := newDecoder(z.frame)
	if err != nil {
		return nil, fmt.Errorf("archive: read: %w", err)
	}
	z.dec = dec
	return z, nil
}

func (z *zstdStream) close() { z.dec.Close() }

// fail records a refusal of this layer and returns it.
func (z *zstdStream) fail(err error) error {
	if z.err == nil {
		z.err = err
	}
	return z.err
}

func (z *zstdStream) Read(p []byte) (int, error) {
	if z.err != nil {
		return 0, z.err
	}
	n, err := z.dec.Read(p)
	z.out += int64(n)
	if allowed := z.allowed(); z.out > allowed {
		return 0, z.fail(fmt.Errorf("%w: zstd stream expands to over %d bytes from %d compressed (limit: %d× + %d)",
			ErrTooLarge, allowed, z.frame.in, z.lim.MaxExpansion, ExpansionAllowance))
	}
	if z.err != nil {
		return n, z.err // the frame walker refused while the decoder read
	}
	return n, err
}

// allowed is how many decompressed bytes the compressed bytes read so far
// entitle the stream to, saturating at math.MaxInt64.
func (z *zstdStream) allowed() int64 {
	hi, lo := bits.Mul64(uint64(z.lim.MaxExpansion), uint64(z.frame.in))
	sum, carry := bits.Add64(lo, uint64(ExpansionAllowance), 0)
	if hi != 0 || carry != 0 || sum > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(sum)
}

// checkEnd is called once the decompressed stream has ended: the frame
// must be complete and be the last thing in the input.
func (z *zstdStream) checkEnd() error {
	if z.frame.state != frameDone {
		return corrupt(endOfArchive, "zstd frame not complete")
	}
	next, err := z.frame.br.Peek(4)
	switch {
	case len(next) == 0 && err == io.EOF:
		return nil
	case len(next) == 0 && err != nil:
		return parseErr(endOfArchive, err)
	case isZstd(next):
		return corrupt(endOfArchive, "a second zstd frame follows the archive")
	case isSkippable(next):
		return corrupt(endOfArchive, "a zstd skippable frame follows the archive")
	default:
		return corrupt(endOfArchive, "data after the end of the zstd frame")
	}
}

// Frame walker states.
const (
	frameHeader = iota
	frameBlock
	frameChecksum
	frameDone
)

// zstdFrame passes through the bytes of one zstd frame (RFC 8878 §3.1.1)
// and then reports io.EOF, parsing just enough to know where the frame
// ends: the frame header, each block header (the last one is flagged) and
// the optional 4-byte checksum.
type zstdFrame struct {
	br       *bufio.Reader
	stream   *zstdStream // where refusals are recorded
	state    int
	pending  int // bytes of the current piece still to pass through
	maxBlock int
	checksum bool
	in       int64 // bytes handed to the decoder
}

func (f *zstdFrame) Read(p []byte) (int, error) {
	if f.stream.err != nil {
		return 0, f.stream.err
	}
	for f.pending == 0 {
		var err error
		switch f.state {
		case frameHeader:
			err = f.header()
		case frameBlock:
			err = f.block()
		case frameChecksum:
			if f.checksum {
				f.pending = 4
			}
			f.state = frameDone
		case frameDone:
			return 0, io.EOF
		}
		if err != nil {
			return 0, err
		}
	}
	n, err := f.br.Read(p[:min(len(p), f.pending)])
	f.pending -= n
	f.in += int64(n)
	if err == io.EOF {
		err = nil
		if n == 0 {
			err = io.ErrUnexpectedEOF
		}
	}
	return n, err
}

// peek returns the next n bytes of the input without consuming them.
func (f *zstdFrame) peek(n int) ([]byte, error) {
	b, err := f.br.Peek(n)
	if len(b) < n {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return b, nil
}

func (f *zstdFrame) header() error {
	b, err := f.peek(5)
	if err != nil {
		return err
	}
	if !isZstd(b) {
		return f.stream.fail(errors.New("not a zstd frame"))
	}
	fhd := b[4]
	fcsFlag, single, reserved, checksum, dictFlag := fhd>>6, fhd>>5&1 == 1, fhd>>3&1 == 1, fhd>>2&1 == 1, fhd&3
	if reserved {
		return f.stream.fail(errors.New("zstd frame header has its reserved bit set"))
	}
	if dictFlag != 0 {
		return f.stream.fail(errors.New("zstd frame needs a dictionary"))
	}
	n := 5
	if !single {
		n++ // window descriptor
	}
	fcsLen := [4]int{0, 2, 4, 8}[fcsFlag]
	if single && fcsFlag == 0 {
		fcsLen = 1
	}
	n += fcsLen
	if b, err = f.peek(n); err != nil {
		return err
	}
	var window uint64
	if single {
		// The window is the whole content, whose size follows.
		fcs := b[n-fcsLen:]
		switch fcsLen {
		case 1:
			window = uint64(fcs[0])
		case 2:
			window = uint64(binary.LittleEndian.Uint16(fcs)) + 256
		case 4:
			window = uint64(binary.LittleEndian.Uint32(fcs))
		case 8:
			window = binary.LittleEndian.Uint64(fcs)
		}
	} else {
		wd := b[5]
		base := uint64(1) << (10 + wd>>3)
		window = base + base/8*uint64(wd&7)
	}
	if window > maxZstdWindow {
		return f.stream.fail(fmt.Errorf("%w: zstd window of %d bytes, over the %d this reader accepts (recompress at level 19 or lower, without --long or --ultra)", ErrTooLarge, window, maxZstdWindow))
	}
	f.maxBlock = int(min(window, 128<<10))
	f.checksum = checksum
	f.pending = n
	f.state = frameBlock
	return nil
}

func (f *zstdFrame) block() error {
	b, err := f.peek(3)
	if err != nil {
		return err
	}
	h := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16
	last, typ, size := h&1 == 1, h>>1&3, int(h>>3)
	if typ == 3 {
		return f.stream.fail(errors.New("zstd block of the reserved type"))
	}
	if size > f.maxBlock && (typ != 2 || size > 128<<10) {
		return f.stream.fail(fmt.Errorf("zstd block of %d bytes, over the %d the frame allows", size, f.maxBlock))
	}
	payload := size
	if typ == 1 { // RLE: one byte, repeated size times
		payload = 1
	}
	f.pending = 3 + payload
	if last {
		f.state = frameChecksum
	}
	return nil
}
