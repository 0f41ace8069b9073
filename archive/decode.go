package archive

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/tidemark-io/tidemark/blobstore"
)

// decodeManifest reads MANIFEST.json from r, a stream of exactly its
// bytes, and checks it as it goes: strict JSON of the shape Write
// produces ("version" first, then "record" and "files" once each, no other
// member; every file exactly "path", "size" and "sha256"), valid UTF-8
// throughout, every file valid (validateFile) and within lim.MaxFiles,
// then the layout (checkLayout) and lim.MaxTotalBytes.
//
// It never holds the manifest's bytes: the file list is decoded one file
// at a time into a compact form (paths and digests packed into large
// shared strings, File values in chunks), and only the final []File is
// allocated whole, at its exact size. See Limits for what this costs.
func decodeManifest(r io.Reader, lim Limits) (*Manifest, error) {
	d := &manifestDecoder{s: scanner{r: r, buf: make([]byte, 4<<10)}, lim: lim}
	m, err := d.decode()
	if err != nil {
		var se *syntaxError
		if errors.As(err, &se) {
			return nil, corrupt(ManifestName, "%s at byte %d", se.msg, se.off)
		}
		return nil, err
	}
	return m, nil
}

// syntaxError is a refusal of the manifest's JSON; decodeManifest turns it
// into an ErrCorrupt naming the manifest.
type syntaxError struct {
	msg string
	off int64
}

func (e *syntaxError) Error() string { return e.msg }

// scanner hands out the manifest's bytes one at a time from a fixed
// buffer, after checking that they are valid UTF-8: only complete,
// validated runes are ever handed out, so no invalid byte reaches the
// parser (encoding/json would have replaced it with U+FFFD).
type scanner struct {
	r     io.Reader
	buf   []byte
	pos   int   // next byte to hand out
	valid int   // buf[:valid] is validated UTF-8
	end   int   // buf[:end] has been read
	off   int64 // stream offset of buf[0]
	eof   bool
	err   error // sticky error of r (not io.EOF)
}

// maxScanBuf is the largest buffer the scanner reads the manifest into.
const maxScanBuf = 64 << 10

func (s *scanner) offset() int64 { return s.off + int64(s.pos) }

func (s *scanner) errorf(format string, args ...any) error {
	return &syntaxError{msg: fmt.Sprintf(format, args...), off: s.offset()}
}

// fill makes at least one more validated byte available, or reports why
// there is none (io.EOF at the end of the stream).
func (s *scanner) fill() error {
	for s.pos == s.valid {
		if s.err != nil {
			return s.err
		}
		if s.eof {
			if s.valid < s.end {
				return s.errorf("invalid UTF-8")
			}
			return io.EOF
		}
		// The buffer grows (to maxScanBuf) only once the stream has
		// filled it, so a small manifest costs a small buffer.
		if s.end == len(s.buf) && len(s.buf) < maxScanBuf {
			s.buf = append(s.buf, make([]byte, len(s.buf))...)
		}
		// Keep the (at most 3) bytes of an incomplete rune.
		n := copy(s.buf, s.buf[s.pos:s.end])
		s.off += int64(s.pos)
		s.pos, s.valid, s.end = 0, 0, n
		m, err := s.r.Read(s.buf[s.end:])
		s.end += m
		if err == io.EOF {
			s.eof = true
		} else if err != nil {
			s.err = err
		}
		// Validate up to the last complete rune; an incomplete one at
		// the end waits for more bytes (or is refused at EOF).
		cut := s.end
		for i := s.end - 1; i >= 0 && i >= s.end-utf8.UTFMax; i-- {
			if s.buf[i] < utf8.RuneSelf {
				break
			}
			if utf8.RuneStart(s.buf[i]) {
				if !utf8.FullRune(s.buf[i:s.end]) {
					cut = i
				}
				break
			}
		}
		if !utf8.Valid(s.buf[:cut]) {
			return s.errorf("invalid UTF-8")
		}
		s.valid = cut
	}
	return nil
}

// next returns the next byte, or an error at the end of the stream.
func (s *scanner) next() (byte, error) {
	if s.pos == s.valid {
		if err := s.fill(); err != nil {
			if err == io.EOF {
				return 0, s.errorf("unexpected end of JSON")
			}
			return 0, err
		}
	}
	b := s.buf[s.pos]
	s.pos++
	return b, nil
}

// peek returns the next byte without consuming it; ok is false at the
// end of the stream.
func (s *scanner) peek() (b byte, ok bool, err error) {
	if s.pos == s.valid {
		if err := s.fill(); err != nil {
			if err == io.EOF {
				return 0, false, nil
			}
			return 0, false, err
		}
	}
	return s.buf[s.pos], true, nil
}

// token skips whitespace and returns the next byte, consumed.
func (s *scanner) token() (byte, error) {
	for {
		b, err := s.next()
		if err != nil {
			return 0, err
		}
		if !isSpace(b) {
			return b, nil
		}
	}
}

func (s *scanner) expect(want byte) error {
	b, err := s.token()
	if err != nil {
		return err
	}
	if b != want {
		s.pos--
		return s.errorf("expected %q, found %q", want, b)
	}
	return nil
}

func isSpace(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' }

// str reads a JSON string (the opening quote already consumed), appending
// its decoded value to dst; a value longer than limit bytes is refused as
// soon as it is seen, so no string costs more than its limit. Lone
// surrogates are refused rather than replaced, like invalid UTF-8.
func (s *scanner) str(dst []byte, limit int) ([]byte, error) {
	start := len(dst)
	for {
		if len(dst)-start > limit {
			return nil, s.errorf("a string is over %d bytes", limit)
		}
		// Copy the plain run in one go.
		if s.pos == s.valid {
			if err := s.fill(); err != nil {
				if err == io.EOF {
					return nil, s.errorf("unexpected end of JSON in a string")
				}
				return nil, err
			}
		}
		run := s.buf[s.pos:s.valid]
		run = run[:min(len(run), limit+1)]
		i := 0
		for i < len(run) && run[i] != '"' && run[i] != '\\' && run[i] >= 0x20 {
			i++
		}
		dst = append(dst, run[:i]...)
		s.pos += i
		if i == len(run) {
			continue
		}
		b, _ := s.next()
		switch {
		case b == '"':
			return dst, nil
		case b < 0x20:
			s.pos--
			return nil, s.errorf("control character %#x in a string", b)
		}
		// A backslash escape.
		e, err := s.next()
		if err != nil {
			return nil, err
		}
		switch e {
		case '"', '\\', '/':
			dst = append(dst, e)
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, err := s.hex4()
			if err != nil {
				return nil, err
			}
			if utf16.IsSurrogate(r) {
				if r >= 0xdc00 {
					return nil, s.errorf("lone surrogate \\u%04x in a string", r)
				}
				if b1, err := s.next(); err != nil || b1 != '\\' {
					return nil, s.errorf("lone surrogate \\u%04x in a string", r)
				}
				if b2, err := s.next(); err != nil || b2 != 'u' {
					return nil, s.errorf("lone surrogate \\u%04x in a string", r)
				}
				r2, err := s.hex4()
				if err != nil {
					return nil, err
				}
				if r = utf16.DecodeRune(r, r2); r == utf8.RuneError {
					return nil, s.errorf("lone surrogate in a string")
				}
			}
			dst = utf8.AppendRune(dst, r)
		default:
			return nil, s.errorf("invalid escape \\%c in a string", e)
		}
	}
}

func (s *scanner) hex4() (rune, error) {
	var r rune
	for range 4 {
		b, err := s.next()
		if err != nil {
			return 0, err
		}
		switch {
		case '0' <= b && b <= '9':
			r = r<<4 | rune(b-'0')
		case 'a' <= b && b <= 'f':
			r = r<<4 | rune(b-'a'+10)
		case 'A' <= b && b <= 'F':
			r = r<<4 | rune(b-'A'+10)
		default:
			return 0, s.errorf("invalid \\u escape")
		}
	}
	return r, nil
}

// integer reads a JSON number that must be an integer fitting an int64.
func (s *scanner) integer(what string) (int64, error) {
	b, err := s.token()
	if err != nil {
		return 0, err
	}
	neg := b == '-'
	if neg {
		if b, err = s.next(); err != nil {
			return 0, err
		}
	}
	if b < '0' || b > '9' {
		s.pos--
		return 0, s.errorf("%s is not an integer", what)
	}
	var v uint64
	digits := 0
	for {
		if digits > 0 && v == 0 {
			return 0, s.errorf("%s has a leading zero", what)
		}
		d := uint64(b - '0')
		if v > (math.MaxInt64-d)/10 {
			return 0, s.errorf("%s overflows int64", what)
		}
		v = v*10 + d
		digits++
		c, ok, err := s.peek()
		if err != nil {
			return 0, err
		}
		if !ok || c < '0' || c > '9' {
			if ok && (c == '.' || c == 'e' || c == 'E') {
				return 0, s.errorf("%s is not an integer", what)
			}
			break
		}
		b, _ = s.next()
	}
	if neg {
		return -int64(v), nil
	}
	return int64(v), nil
}

// rawValue reads one JSON value and returns its bytes exactly, for the
// record, which this package treats as opaque. It only finds where the
// value ends (strings, nesting); validateRecord then checks it whole with
// json.Valid. The bytes are gathered in chunks and joined once, so a
// large record costs at most twice its size.
func (s *scanner) rawValue() ([]byte, error) {
	first, err := s.token()
	if err != nil {
		return nil, err
	}
	s.pos--
	scalar := first != '{' && first != '[' && first != '"'
	var chunks [][]byte
	cur := make([]byte, 0, 512)
	total := 0
	depth, inStr, esc := 0, false, false
	for {
		c, ok, err := s.peek()
		if err != nil {
			return nil, err
		}
		if scalar && total > 0 && (!ok || isSpace(c) || c == ',' || c == '}' || c == ']') {
			break // a scalar ends at a delimiter, which is not part of it
		}
		if !ok {
			return nil, s.errorf("unexpected end of JSON in the record")
		}
		s.pos++
		if len(cur) == cap(cur) {
			chunks = append(chunks, cur)
			cur = make([]byte, 0, min(2*cap(cur), 1<<20))
		}
		cur = append(cur, c)
		total++
		switch {
		case inStr:
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
		case c == '"':
			inStr = true
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			depth--
		}
		if !scalar && !inStr && depth <= 0 {
			break // the container or string is closed
		}
	}
	out := make([]byte, 0, total)
	for _, c := range chunks {
		out = append(out, c...)
	}
	return append(out, cur...), nil
}

// manifestDecoder builds the Manifest.
type manifestDecoder struct {
	s       scanner
	lim     Limits
	strs    stringArena
	scratch []byte
	chunks  [][]File
	n       int
	total   int64
}

func (d *manifestDecoder) decode() (*Manifest, error) {
	s := &d.s
	if err := s.expect('{'); err != nil {
		return nil, err
	}
	// The version comes first, so that an archive of a newer format is
	// refused for its version, not for a member this reader does not
	// know.
	key, err := d.key()
	if err != nil {
		return nil, err
	}
	if string(key) != "version" {
		return nil, corrupt(ManifestName, "first member is %q, not \"version\"", key)
	}
	v, err := s.integer("version")
	if err != nil {
		return nil, err
	}
	if v != FormatVersion {
		return nil, corrupt(ManifestName, "unknown format version %d (this reader knows %d)", v, FormatVersion)
	}
	m := &Manifest{Version: FormatVersion}
	var haveRecord, haveFiles bool
	for {
		b, err := s.token()
		if err != nil {
			return nil, err
		}
		if b == '}' {
			break
		}
		if b != ',' {
			s.pos--
			return nil, s.errorf("expected ',' or '}', found %q", b)
		}
		key, err := d.key()
		if err != nil {
			return nil, err
		}
		switch k := string(key); {
		case k == "record" && !haveRecord:
			haveRecord = true
			if m.Record, err = s.rawValue(); err != nil {
				return nil, err
			}
			if err := validateRecord(m.Record); err != nil {
				return nil, err
			}
		case k == "files" && !haveFiles:
			haveFiles = true
			if err := d.files(); err != nil {
				return nil, err
			}
		case k == "version" || k == "record" || k == "files":
			return nil, corrupt(ManifestName, "member %q appears twice", k)
		default:
			return nil, corrupt(ManifestName, "json: unknown field %q", k)
		}
	}
	if _, more, err := d.peekToken(); err != nil {
		return nil, err
	} else if more {
		return nil, corrupt(ManifestName, "data after the JSON object")
	}
	if !haveRecord {
		return nil, corrupt(ManifestName, "no checkpoint record")
	}
	m.Files = d.assemble()
	if err := checkLayout(m.Files); err != nil {
		return nil, err
	}
	if d.total > d.lim.MaxTotalBytes {
		return nil, tooLarge(ManifestName, "files total %d bytes, over the %d-byte limit", d.total, d.lim.MaxTotalBytes)
	}
	return m, nil
}

// key reads an object member's name and the colon after it. The name is
// valid until the next string is read.
func (d *manifestDecoder) key() ([]byte, error) {
	if err := d.s.expect('"'); err != nil {
		return nil, err
	}
	k, err := d.s.str(d.scratch[:0], maxKeyLen)
	if err != nil {
		return nil, err
	}
	d.scratch = k
	if err := d.s.expect(':'); err != nil {
		return nil, err
	}
	return k, nil
}

// maxKeyLen bounds member names: every name this reader knows is shorter.
const maxKeyLen = 64

// files reads the file list: null (no files) or an array of files.
func (d *manifestDecoder) files() error {
	s := &d.s
	b, err := s.token()
	if err != nil {
		return err
	}
	if b == 'n' {
		for _, want := range []byte("ull") {
			if c, err := s.next(); err != nil || c != want {
				return s.errorf("invalid literal")
			}
		}
		return nil
	}
	if b != '[' {
		s.pos--
		return s.errorf("files is not an array")
	}
	if c, ok, err := d.peekToken(); err != nil {
		return err
	} else if ok && c == ']' {
		s.next()
		return nil
	}
	for {
		if err := d.file(); err != nil {
			return err
		}
		b, err := s.token()
		if err != nil {
			return err
		}
		if b == ']' {
			return nil
		}
		if b != ',' {
			s.pos--
			return s.errorf("expected ',' or ']', found %q", b)
		}
	}
}

func (d *manifestDecoder) peekToken() (byte, bool, error) {
	for {
		c, ok, err := d.s.peek()
		if err != nil || !ok || !isSpace(c) {
			return c, ok, err
		}
		d.s.pos++
	}
}

// file reads one file object and appends it.
func (d *manifestDecoder) file() error {
	s := &d.s
	if d.n >= d.lim.MaxFiles {
		return tooLarge(ManifestName, "over %d files", d.lim.MaxFiles)
	}
	if err := s.expect('{'); err != nil {
		return err
	}
	var f File
	var seen [3]bool
	for i := 0; ; i++ {
		if i > 0 {
			b, err := s.token()
			if err != nil {
				return err
			}
			if b == '}' {
				break
			}
			if b != ',' {
				s.pos--
				return s.errorf("expected ',' or '}', found %q", b)
			}
		}
		key, err := d.key()
		if err != nil {
			return err
		}
		var k int
		switch string(key) {
		case "path":
			k = 0
		case "size":
			k = 1
		case "sha256":
			k = 2
		default:
			return corrupt(ManifestName, "json: unknown field %q in a file", key)
		}
		if seen[k] {
			return corrupt(ManifestName, "member %q appears twice in a file", key)
		}
		seen[k] = true
		if k == 1 {
			if f.Size, err = s.integer("size"); err != nil {
				return err
			}
			continue
		}
		if err := s.expect('"'); err != nil {
			return err
		}
		limit := maxPathLen
		if k == 2 {
			limit = 64
		}
		v, err := s.str(d.scratch[:0], limit)
		if err != nil {
			return err
		}
		d.scratch = v
		if k == 0 {
			f.Path = d.strs.add(v)
		} else {
			f.SHA256 = d.strs.add(v)
		}
	}
	for k, name := range []string{"path", "size", "sha256"} {
		if !seen[k] {
			return corrupt(ManifestName, "a file has no %q", name)
		}
	}
	total, err := validateFile(f, d.total)
	if err != nil {
		return err
	}
	d.total = total
	if len(d.chunks) == 0 || len(d.chunks[len(d.chunks)-1]) == cap(d.chunks[len(d.chunks)-1]) {
		size := 256
		if len(d.chunks) > 0 {
			size = min(2*cap(d.chunks[len(d.chunks)-1]), 16<<10)
		}
		d.chunks = append(d.chunks, make([]File, 0, size))
	}
	c := &d.chunks[len(d.chunks)-1]
	*c = append(*c, f)
	d.n++
	return nil
}

// assemble returns the files decoded so far as one slice of exactly their
// number, never nil, releasing the chunks.
func (d *manifestDecoder) assemble() []File {
	files := make([]File, 0, d.n)
	for i, c := range d.chunks {
		files = append(files, c...)
		d.chunks[i] = nil
	}
	d.chunks = nil
	return files
}

// maxPathLen bounds a path while it is decoded: no longer path can be
// valid (see ValidatePath).
const maxPathLen = blobstore.MaxKeyLen

// stringArena packs many small strings into a few large ones: each add
// returns a substring of a strings.Builder that only ever grows within its
// capacity, so there is one allocation per chunk instead of one (with its
// rounding) per string.
type stringArena struct {
	b strings.Builder
}

func (a *stringArena) add(p []byte) string {
	if a.b.Cap()-a.b.Len() < len(p) {
		size := max(4<<10, min(2*a.b.Cap(), 1<<20), len(p))
		a.b = strings.Builder{}
		a.b.Grow(size)
	}
	start := a.b.Len()
	a.b.Write(p)
	return a.b.String()[start:]
}
