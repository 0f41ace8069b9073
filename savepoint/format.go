package savepoint

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/tidemark-io/tidemark/archive"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/encrypted"
)

// Format is how a savepoint's object stores it.
type Format int

const (
	// FormatArchive is one archive object (package archive) holding the
	// manifest and every file: what every savepoint was before
	// FormatManifest, still read everywhere.
	FormatArchive Format = 1
	// FormatManifest is a manifest object naming content objects in the
	// savepoint area (see the package doc).
	FormatManifest Format = 2
)

func (f Format) String() string {
	switch f {
	case FormatArchive:
		return "archive"
	case FormatManifest:
		return "manifest"
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

// A manifest object is two lines of JSON (a stream jq reads as it is):
// a header, then the archive's MANIFEST.json exactly as an archive would
// hold it (archive.EncodeManifest).
//
//	{"format":"tidemark-savepoint-manifest","version":1,"files":3,"bytes":12345}
//	{"version":1,"record":{…},"files":[{"path":"state/op-0/000001.sst","size":…,"sha256":"…"},…]}
//
// The header's first bytes tell it from an archive, which starts with a
// tar header or the zstd magic. Its counts let ls show a savepoint's size
// from one short ranged read; readers check them against the manifest.
const (
	manifestFormat  = "tidemark-savepoint-manifest"
	manifestVersion = 1
	// maxHeaderBytes bounds the header line.
	maxHeaderBytes = 4 << 10
)

// manifestMagic is how every manifest object starts.
var manifestMagic = []byte(`{"format":"` + manifestFormat + `"`)

// header is the first line of a manifest object.
type header struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
	Files   int    `json:"files"`
	Bytes   int64  `json:"bytes"`
	// KeyID is the id of the master key the savepoint's content objects
	// are encrypted under (package blobstore/encrypted), when the store
	// it was written to encrypts them; absent for plain content and in
	// manifests written before the field existed.
	KeyID string `json:"encryption_key_id,omitempty"`
}

// encodeObject returns the manifest object of m, refusing (ErrCorrupt)
// what a reader with lim would refuse; keyID is the header's KeyID.
func encodeObject(m *archive.Manifest, lim archive.Limits, keyID string) ([]byte, error) {
	mj, err := archive.EncodeManifest(m, lim)
	if err != nil {
		return nil, err
	}
	hj, err := json.Marshal(header{Format: manifestFormat, Version: manifestVersion, Files: len(m.Files), Bytes: m.TotalSize(), KeyID: keyID})
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.Grow(len(hj) + len(mj) + 2)
	b.Write(hj)
	b.WriteByte('\n')
	b.Write(mj)
	b.WriteByte('\n')
	return b.Bytes(), nil
}

// sniff reports the format of an object whose first bytes are head (at
// least len(manifestMagic) of them, unless the object is shorter).
func sniff(head []byte) Format {
	if bytes.HasPrefix(head, manifestMagic) {
		return FormatManifest
	}
	return FormatArchive
}

// decodeHeader reads and checks the header line from br.
func decodeHeader(br *bufio.Reader) (header, error) {
	var h header
	line, err := br.ReadSlice('\n')
	switch {
	case err == bufio.ErrBufferFull || len(line) > maxHeaderBytes:
		return h, corrupt("header line over %d bytes", maxHeaderBytes)
	case err == io.EOF:
		return h, corrupt("no manifest after the header")
	case err != nil:
		return h, err
	}
	if err := json.Unmarshal(line, &h); err != nil {
		return h, corrupt("header: %v", err)
	}
	if h.Format != manifestFormat || h.Version != manifestVersion {
		return h, corrupt("header: format %q version %d, this reader knows %q version %d", h.Format, h.Version, manifestFormat, manifestVersion)
	}
	if h.KeyID != "" {
		if err := encrypted.ValidateKeyID(h.KeyID); err != nil {
			return h, corrupt("header: encryption_key_id: %v", err)
		}
	}
	return h, nil
}

// keyIDOf returns the id of the key bs encrypts the content of m under
// (header.KeyID): "" when it encrypts none. One key serves a store, so
// the first file tells.
func keyIDOf(bs blobstore.Blobstore, m *archive.Manifest) string {
	if len(m.Files) == 0 {
		return ""
	}
	return encrypted.KeyIDOf(bs, ContentKey(m.Files[0].SHA256))
}

// decodeObject reads a whole manifest object from r (its first bytes
// included) and checks it: the header, the manifest with lim (as an
// archive's), and that they agree. It returns the header too.
func decodeObject(r io.Reader, lim archive.Limits) (*archive.Manifest, header, error) {
	br := bufio.NewReaderSize(r, maxHeaderBytes)
	h, err := decodeHeader(br)
	if err != nil {
		return nil, h, err
	}
	m, err := archive.DecodeManifest(br, lim)
	if err != nil {
		return nil, h, err
	}
	if h.Files != len(m.Files) || h.Bytes != m.TotalSize() {
		return nil, h, corrupt("header says %d files of %d bytes, the manifest lists %d of %d", h.Files, h.Bytes, len(m.Files), m.TotalSize())
	}
	return m, h, nil
}

// corrupt returns an error wrapping archive.ErrCorrupt about a manifest
// object.
func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: manifest object: %s", archive.ErrCorrupt, fmt.Sprintf(format, args...))
}
