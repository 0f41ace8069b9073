package archive

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// entry is one hand-made tar entry.
type entry struct {
	hdr  tar.Header
	body []byte
}

func reg(name string, body []byte) entry {
	return entry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: name, Size: int64(len(body)), Mode: 0o644, ModTime: epoch}, body: body}
}

// regSized is a regular entry whose header claims size but carries body.
func regSized(name string, size int64, body []byte) entry {
	e := reg(name, body)
	e.hdr.Size = size
	return e
}

func special(name string, typ byte, link string) entry {
	return entry{hdr: tar.Header{Typeflag: typ, Name: name, Linkname: link, Mode: 0o644, ModTime: epoch, Devmajor: 1, Devminor: 3}}
}

func fileOf(path string, content []byte) File {
	sum := sha256.Sum256(content)
	return File{Path: path, Size: int64(len(content)), SHA256: hex.EncodeToString(sum[:])}
}

const testRecord = `{"id":"0000000042","status":"completed"}`

func manifestOf(files ...File) []byte {
	if files == nil {
		files = []File{}
	}
	b, err := json.Marshal(Manifest{Version: FormatVersion, Record: json.RawMessage(testRecord), Files: files})
	if err != nil {
		panic(err)
	}
	return b
}

// rawTar builds a tar stream of entries. Bodies shorter than the header
// size are written as is and the stream is cut there (no end marker),
// which is how truncated archives are made.
func rawTar(entries ...entry) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := e.hdr
		if err := tw.WriteHeader(&h); err != nil {
			panic(err)
		}
		if len(e.body) > 0 {
			n, err := tw.Write(e.body)
			if err != nil && int64(n) != h.Size {
				// Body longer than the header: tar refuses; cases
				// that need that use a different construction.
				panic(err)
			}
		}
		if int64(len(e.body)) < h.Size {
			return buf.Bytes() // truncated: stop here
		}
	}
	if err := tw.Close(); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

func zstdOf(b []byte) []byte {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		panic(err)
	}
	defer enc.Close()
	return enc.EncodeAll(b, nil)
}

// goodArchive is a small valid archive: two files of two owners.
func goodArchive() []byte {
	a, b := []byte("alpha"), []byte("")
	return rawTar(
		reg(ManifestName, manifestOf(fileOf("state/op1/000001.sst", a), fileOf("state/op2/sub/EMPTY", b))),
		reg("state/op1/000001.sst", a),
		reg("state/op2/sub/EMPTY", b),
	)
}

func mustNoErr(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
