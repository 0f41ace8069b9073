package archive

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// hostileCase is an archive Read must refuse.
type hostileCase struct {
	name string
	data []byte
	lim  Limits
	// entry must appear, quoted, in the error.
	entry string
	// tooLarge: the refusal is because of Limits.
	tooLarge bool
	// plainOnly: do not also try the case zstd-compressed (it is about
	// the compression layer itself).
	plainOnly bool
	// msg, if set, must appear in the error.
	msg string
}

func hostileCases() []hostileCase {
	x, y := []byte("alpha"), []byte("bravo")
	fx, fy := fileOf("state/a/x", x), fileOf("state/a/y", y)
	empty := fileOf("state/a/e", nil)
	m := func(files ...File) entry { return reg(ManifestName, manifestOf(files...)) }
	rawM := func(s string) entry { return reg(ManifestName, []byte(s)) }
	// badPath lists p in the manifest and stores it, so only the path is
	// wrong.
	badPath := func(name, p string) hostileCase {
		f := fileOf(p, x)
		return hostileCase{name: "path " + name, data: rawTar(m(f), reg(p, x)), entry: p}
	}
	// special lists p as an empty file and stores it as type typ.
	specialCase := func(name string, typ byte, link string) hostileCase {
		f := fileOf("state/a/s", nil)
		return hostileCase{name: name, data: rawTar(m(f), special("state/a/s", typ, link)), entry: "state/a/s"}
	}
	good := goodArchive()
	badChecksum := rawTar(m(fx), reg("state/a/x", x))
	badChecksum[512+((len(manifestOf(fx))+511)/512)*512+148] ^= 0x55 // header checksum of the 2nd entry
	zgood := zstdOf(good)

	return []hostileCase{
		// The manifest.
		{name: "empty stream", data: nil, entry: ManifestName},
		{name: "empty tar", data: rawTar(), entry: ManifestName},
		{name: "late manifest", data: rawTar(reg("state/a/x", x), m(fx)), entry: "state/a/x"},
		{name: "no manifest", data: rawTar(reg("state/a/x", x)), entry: "state/a/x"},
		{name: "manifest is a directory", data: rawTar(special(ManifestName, tar.TypeDir, "")), entry: ManifestName},
		{name: "manifest is a symlink", data: rawTar(special(ManifestName, tar.TypeSymlink, "/etc/passwd")), entry: ManifestName},
		{name: "manifest not JSON", data: rawTar(rawM("not json")), entry: ManifestName},
		{name: "manifest truncated", data: rawTar(regSized(ManifestName, 100, []byte(`{"version":1,`))), entry: ManifestName},
		{name: "unknown version", data: rawTar(rawM(`{"version":2,"record":{},"files":[],"future":true}`)), entry: ManifestName},
		{name: "version missing", data: rawTar(rawM(`{"record":{},"files":[]}`)), entry: ManifestName},
		{name: "unknown field", data: rawTar(rawM(`{"version":1,"record":{},"files":[],"extra":1}`)), entry: ManifestName},
		{name: "data after manifest JSON", data: rawTar(rawM(`{"version":1,"record":{},"files":[]} {}`)), entry: ManifestName},
		{name: "no record", data: rawTar(rawM(`{"version":1,"files":[]}`)), entry: ManifestName},
		{name: "null record", data: rawTar(rawM(`{"version":1,"record":null,"files":[]}`)), entry: ManifestName},
		{name: "manifest twice at start", data: rawTar(m(fx), m(fx), reg("state/a/x", x)), entry: ManifestName},
		{name: "manifest twice at end", data: rawTar(m(fx), reg("state/a/x", x), m(fx)), entry: ManifestName},

		// Limits, checked on the manifest before any file is read.
		{name: "manifest over MaxManifestBytes", data: rawTar(m(fx)), lim: Limits{MaxManifestBytes: 16}, entry: ManifestName, tooLarge: true},
		{name: "files over MaxFiles", data: rawTar(m(fx, fy), reg("state/a/x", x), reg("state/a/y", y)), lim: Limits{MaxFiles: 1}, entry: ManifestName, tooLarge: true},
		{name: "declared total over MaxTotalBytes", data: rawTar(m(fx, fy), reg("state/a/x", x), reg("state/a/y", y)), lim: Limits{MaxTotalBytes: 9}, entry: ManifestName, tooLarge: true},
		{name: "huge declared size with tiny data", data: rawTar(m(File{Path: "state/a/x", Size: 1 << 50, SHA256: fx.SHA256}), reg("state/a/x", x)), entry: ManifestName, tooLarge: true},
		{name: "sizes overflow", data: rawTar(m(File{Path: "state/a/x", Size: math.MaxInt64, SHA256: fx.SHA256}, File{Path: "state/a/y", Size: math.MaxInt64, SHA256: fy.SHA256})), entry: "state/a/y"},

		// Paths.
		badPath("absolute", "/etc/passwd"),
		badPath("absolute under state", "/state/a/x"),
		badPath("dot-dot", "state/a/../../../etc/passwd"),
		badPath("dot", "state/./a/x"),
		badPath("empty segment", "state//a/x"),
		// tar.Writer cannot store this name; the manifest alone is refused.
		{name: "path trailing slash", data: rawTar(m(fileOf("state/a/x/", x))), entry: "state/a/x/"},
		badPath("backslash", `state/a/..\..\..\x`),
		badPath("outside state", "etc/passwd"),
		badPath("no owner", "state/x"),
		badPath("control character", "state/a/x\n"),
		badPath("invalid UTF-8", "state/a/\xff"),
		badPath("manifest name", ManifestName),
		badPath("segment over 255 bytes", "state/a/"+strings.Repeat("n", 256)),
		{name: "path empty", data: rawTar(m(File{Path: "", Size: 0, SHA256: empty.SHA256})), entry: ""},
		{name: "negative size", data: rawTar(m(File{Path: "state/a/x", Size: -1, SHA256: fx.SHA256})), entry: "state/a/x"},
		{name: "digest not lower-case hex", data: rawTar(m(File{Path: "state/a/x", Size: 5, SHA256: strings.ToUpper(fx.SHA256)}), reg("state/a/x", x)), entry: "state/a/x"},
		{name: "digest short", data: rawTar(m(File{Path: "state/a/x", Size: 5, SHA256: fx.SHA256[:10]}), reg("state/a/x", x)), entry: "state/a/x"},
		{name: "duplicate in manifest", data: rawTar(m(fx, fx), reg("state/a/x", x), reg("state/a/x", x)), entry: "state/a/x"},
		{name: "file is also a directory", data: rawTar(m(fx, fileOf("state/a/x/y", y)), reg("state/a/x", x), reg("state/a/x/y", y)), entry: "state/a/x"},

		// Entry types, even when the manifest lists them.
		specialCase("symlink", tar.TypeSymlink, "/etc/passwd"),
		specialCase("hard link", tar.TypeLink, "state/a/x"),
		specialCase("char device", tar.TypeChar, ""),
		specialCase("block device", tar.TypeBlock, ""),
		specialCase("fifo", tar.TypeFifo, ""),
		specialCase("directory", tar.TypeDir, ""),
		{name: "unlisted symlink", data: rawTar(m(fx), reg("state/a/x", x), special("state/a/evil", tar.TypeSymlink, "/")), entry: "state/a/evil"},
		{name: "global PAX header", data: rawTar(m(fx), entry{hdr: tar.Header{Typeflag: tar.TypeXGlobalHeader, Name: "pax_global_header", PAXRecords: map[string]string{"path": "/etc/passwd"}}}, reg("state/a/x", x)), entry: "/etc/passwd"},

		// Entries against the manifest.
		{name: "duplicate entry at end", data: rawTar(m(fx), reg("state/a/x", x), reg("state/a/x", x)), entry: "state/a/x"},
		{name: "duplicate entry in the middle", data: rawTar(m(fx, fy), reg("state/a/x", x), reg("state/a/x", x), reg("state/a/y", y)), entry: "state/a/x"},
		{name: "unlisted entry at end", data: rawTar(m(fx), reg("state/a/x", x), reg("state/a/z", y)), entry: "state/a/z"},
		{name: "unlisted entry in the middle", data: rawTar(m(fx, fy), reg("state/a/x", x), reg("state/a/z", y), reg("state/a/y", y)), entry: "state/a/z"},
		{name: "unlisted traversal entry", data: rawTar(m(fx), reg("state/a/../a/x", x)), entry: "state/a/../a/x"},
		{name: "listed file missing", data: rawTar(m(fx, fy), reg("state/a/x", x)), entry: "state/a/y"},
		{name: "out of order", data: rawTar(m(fx, fy), reg("state/a/y", y), reg("state/a/x", x)), entry: "state/a/y"},
		{name: "size differs from manifest", data: rawTar(m(fx), reg("state/a/x", []byte("alph"))), entry: "state/a/x"},
		{name: "digest differs from manifest", data: rawTar(m(fx), reg("state/a/x", []byte("alphA"))), entry: "state/a/x"},
		{name: "digest mismatch in empty file", data: rawTar(m(File{Path: "state/a/e", SHA256: fx.SHA256}), reg("state/a/e", nil)), entry: "state/a/e"},
		{name: "file truncated", data: rawTar(m(fx), regSized("state/a/x", 5, []byte("al"))), entry: "state/a/x"},
		{name: "bad header checksum", data: badChecksum, entry: "after MANIFEST.json"},
		{name: "trailing garbage", data: append(bytes.Clone(good), "garbage"...), entry: "end of archive"},

		// The compression layer.
		{name: "zstd garbage", data: append(bytes.Clone(zstdMagic), bytes.Repeat([]byte{0xa5}, 64)...), entry: ManifestName, plainOnly: true},
		{name: "zstd truncated", data: zgood[:len(zgood)-8], entry: ManifestName, plainOnly: true},
		{name: "zstd frame checksum cut", data: zgood[:len(zgood)-4], entry: ManifestName, plainOnly: true},
		{name: "zstd frame checksum wrong", data: append(bytes.Clone(zgood[:len(zgood)-4]), 1, 2, 3, 4), entry: ManifestName, plainOnly: true},
		{name: "zstd then garbage", data: append(bytes.Clone(zgood), "garbage!"...), entry: "end of archive", plainOnly: true},

		// Sparse entries: the stream carries 512 bytes of the file, tar
		// would make up the rest.
		{name: "sparse GNU old format", data: sparseArchive("gnu-old", 2<<30), entry: "state/a/big", msg: "sparse"},
		{name: "sparse PAX 0.0", data: sparseArchive("pax-0.0", 2<<30), entry: "state/a/big", msg: "sparse"},
		{name: "sparse PAX 0.1", data: sparseArchive("pax-0.1", 2<<30), entry: "state/a/big", msg: "sparse"},
		{name: "sparse PAX 1.0", data: sparseArchive("pax-1.0", 2<<30), entry: "state/a/big", msg: "sparse"},
		{name: "sparse PAX 1.0 of 256 GiB", data: sparseArchive("pax-1.0", 256<<30), entry: "state/a/big", msg: "sparse"},

		// Exactly the archive: its end marker, zero padding of any
		// length, and nothing else.
		{name: "end marker missing", data: good[:len(good)-1024], entry: "end of archive", msg: "marker"},
		{name: "end marker cut", data: good[:len(good)-512], entry: "end of archive", msg: "marker"},
		{name: "data after 64 KiB of padding", data: append(append(bytes.Clone(good), make([]byte, 64<<10)...), 1), entry: "end of archive", msg: "data after"},
		{name: "zstd skippable frame after", data: append(bytes.Clone(zgood), skippableFrame([]byte("hidden"))...), entry: "end of archive", msg: "skippable", plainOnly: true},
		{name: "second zstd frame", data: append(bytes.Clone(zgood), zstdOf(make([]byte, 1024))...), entry: "end of archive", msg: "second zstd frame", plainOnly: true},
		{name: "zeros after the zstd frame", data: append(bytes.Clone(zgood), 0, 0, 0, 0), entry: "end of archive", plainOnly: true},
		{name: "zstd skippable frame first", data: append(skippableFrame([]byte("hidden")), zgood...), entry: "start of archive", msg: "skippable", plainOnly: true},
		{name: "zstd window over 8 MiB", data: newZstdFrame(0x70).withRaw(good), entry: ManifestName, tooLarge: true, msg: "window", plainOnly: true},
		{name: "zstd dictionary", data: append([]byte{0x28, 0xb5, 0x2f, 0xfd, 0x01, 0x38, 0x07}, zgood[6:]...), entry: ManifestName, msg: "dictionary", plainOnly: true},

		// Compressed formats this package does not read are named.
		{name: "gzip", data: gzipOf(good), entry: "start of archive", msg: "archive is gzip-compressed; Tidemark reads plain tar or zstd", plainOnly: true},
		{name: "bzip2", data: append([]byte("BZh91AY&SY"), good...), entry: "start of archive", msg: "bzip2-compressed", plainOnly: true},
		{name: "xz", data: append([]byte("\xfd7zXZ\x00\x00\x04"), good...), entry: "start of archive", msg: "xz-compressed", plainOnly: true},
		{name: "lz4", data: append([]byte{0x04, 0x22, 0x4d, 0x18, 0x64, 0x40, 0xa7}, good...), entry: "start of archive", msg: "lz4-compressed", plainOnly: true},
		{name: "zip", data: zipOf(good), entry: "start of archive", msg: "zip file", plainOnly: true},

		// The manifest's bytes: valid UTF-8, strict JSON.
		{name: "invalid UTF-8 in the record", data: rawTar(rawM(`{"version":1,"record":{"id":"` + "\xff" + `"},"files":[]}`)), entry: ManifestName, msg: "UTF-8"},
		{name: "invalid UTF-8 in a path", data: rawTar(rawM(`{"version":1,"record":{},"files":[{"path":"state/a/`+"\xff"+`","size":5,"sha256":"`+fx.SHA256+`"}]}`), reg("state/a/\ufffd", x)), entry: ManifestName, msg: "UTF-8"},
		{name: "lone surrogate in a path", data: rawTar(rawM(`{"version":1,"record":{},"files":[{"path":"state/a/\ud800","size":5,"sha256":"`+fx.SHA256+`"}]}`), reg("state/a/\ufffd", x)), entry: ManifestName, msg: "surrogate"},
		{name: "files twice", data: rawTar(rawM(`{"version":1,"record":{},"files":[],"files":[]}`)), entry: ManifestName, msg: "twice"},
		{name: "member name in another case", data: rawTar(rawM(`{"version":1,"Record":{},"files":[]}`)), entry: ManifestName, msg: "unknown field"},
		{name: "size not an integer", data: rawTar(rawM(`{"version":1,"record":{},"files":[{"path":"state/a/x","size":5.0,"sha256":"`+fx.SHA256+`"}]}`), reg("state/a/x", x)), entry: ManifestName, msg: "integer"},
		{name: "size null", data: rawTar(rawM(`{"version":1,"record":{},"files":[{"path":"state/a/e","size":null,"sha256":"`+empty.SHA256+`"}]}`), reg("state/a/e", nil)), entry: ManifestName},
	}
}

// allHostileCases adds the zstd-compressed form of every case that is
// not about compression.
func allHostileCases() []hostileCase {
	var out []hostileCase
	for _, c := range hostileCases() {
		out = append(out, c)
		if !c.plainOnly {
			z := c
			z.name += " (zstd)"
			z.data = zstdOf(c.data)
			out = append(out, z)
		}
	}
	return out
}

func TestGoodArchiveIsAccepted(t *testing.T) {
	// The hostile cases are edits of archives like this one; if it were
	// refused, they would prove nothing.
	for _, data := range [][]byte{goodArchive(), zstdOf(goodArchive()), append(goodArchive(), make([]byte, 9<<10)...)} {
		if _, err := Verify(context.Background(), bytes.NewReader(data), Limits{}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestHostileArchivesAreRefused(t *testing.T) {
	for _, c := range allHostileCases() {
		t.Run(c.name, func(t *testing.T) {
			check := func(op string, err error) {
				t.Helper()
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("%s: got %v, want ErrCorrupt", op, err)
				}
				if want := strconv.Quote(c.entry); !strings.Contains(err.Error(), want) {
					t.Errorf("%s: error %q does not name entry %s", op, err, want)
				}
				if got := errors.Is(err, ErrTooLarge); got != c.tooLarge {
					t.Errorf("%s: errors.Is(err, ErrTooLarge) = %v, want %v (%v)", op, got, c.tooLarge, err)
				}
				if !strings.Contains(err.Error(), c.msg) {
					t.Errorf("%s: error %q does not say %q", op, err, c.msg)
				}
			}

			m, err := Verify(context.Background(), bytes.NewReader(c.data), c.lim)
			check("Verify", err)
			if m != nil {
				t.Errorf("Verify returned a manifest with its error")
			}

			base := t.TempDir()
			dir := filepath.Join(base, "p", "dest")
			_, err = ExtractDir(context.Background(), bytes.NewReader(c.data), dir, c.lim)
			check("ExtractDir", err)
			assertNothingExtracted(t, base, dir)
		})
	}
}

// assertNothingExtracted checks that dir does not exist and that its
// parent holds nothing (no temporary directory left behind).
func assertNothingExtracted(t *testing.T, base, dir string) {
	t.Helper()
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s exists after a refused extraction (err=%v)", dir, err)
	}
	ents, err := os.ReadDir(filepath.Dir(dir))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("left behind in %s: %s", filepath.Dir(dir), e.Name())
	}
	top, err := os.ReadDir(base)
	mustNoErr(t, err)
	for _, e := range top {
		if e.Name() != filepath.Base(filepath.Dir(dir)) {
			t.Errorf("written outside the destination: %s", filepath.Join(base, e.Name()))
		}
	}
}

func TestTruncatedArchivesAreRefused(t *testing.T) {
	// Every cut that loses content is refused. A plain tar cut after the
	// last file's content (in its padding or the end marker) still holds
	// every verified byte, so only earlier cuts must fail; a zstd stream
	// must be whole.
	var entries []entry
	var files []File
	for i, size := range []int{0, 1, 511, 512, 513, 3000} {
		content := bytes.Repeat([]byte{byte('a' + i)}, size)
		p := "state/a/f" + strconv.Itoa(i)
		files = append(files, fileOf(p, content))
		entries = append(entries, reg(p, content))
	}
	plain := rawTar(append([]entry{reg(ManifestName, manifestOf(files...))}, entries...)...)
	for _, c := range []struct {
		name string
		data []byte
		upTo int
	}{
		{"plain", plain, contentEnd(t, plain)},
		{"zstd", zstdOf(plain), len(zstdOf(plain))},
	} {
		t.Run(c.name, func(t *testing.T) {
			for n := 0; n < c.upTo; n++ {
				_, err := Verify(context.Background(), bytes.NewReader(c.data[:n]), Limits{})
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("cut at %d of %d: got %v, want ErrCorrupt", n, len(c.data), err)
				}
			}
		})
	}
}

// contentEnd returns the offset just after the last content byte of the
// plain tar stream data.
func contentEnd(t *testing.T, data []byte) int {
	r := bytes.NewReader(data)
	tr := tar.NewReader(r)
	end := 0
	for {
		_, err := tr.Next()
		if err == io.EOF {
			return end
		}
		mustNoErr(t, err)
		_, err = io.Copy(io.Discard, tr)
		mustNoErr(t, err)
		end = len(data) - r.Len()
	}
}
