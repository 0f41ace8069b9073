package archive

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// EncodeManifest returns m as an archive's MANIFEST.json holds it, after
// the checks Write applies: those Read applies (version, record, paths,
// sizes, digests, layout) and lim, so that whatever it returns
// DecodeManifest accepts with the same lim.
func EncodeManifest(m *Manifest, lim Limits) ([]byte, error) {
	total, err := validateManifest(m)
	if err != nil {
		return nil, err
	}
	lim = lim.withDefaults()
	if len(m.Files) > lim.MaxFiles {
		return nil, tooLarge(ManifestName, "%d files, over the limit of %d", len(m.Files), lim.MaxFiles)
	}
	if total > lim.MaxTotalBytes {
		return nil, tooLarge(ManifestName, "files total %d bytes, over the %d-byte limit", total, lim.MaxTotalBytes)
	}
	mm := *m
	if mm.Files == nil {
		mm.Files = []File{} // "files": [], not null
	}
	b, err := json.Marshal(&mm)
	if err != nil {
		return nil, fmt.Errorf("encode manifest: %w", err)
	}
	if int64(len(b)) > lim.MaxManifestBytes {
		return nil, tooLarge(ManifestName, "%d bytes, over the %d-byte limit", len(b), lim.MaxManifestBytes)
	}
	return b, nil
}

// DecodeManifest reads a MANIFEST.json stored on its own (not inside an
// archive) from r, to its end, with the checks and bounds NewReader
// applies to an archive's: strict JSON, every path, size and digest, the
// layout, and lim (MaxManifestBytes bounds the bytes read; trailing
// whitespace is allowed, anything else after the object is refused). A
// refusal wraps ErrCorrupt; an error of r is returned as it is.
func DecodeManifest(r io.Reader, lim Limits) (*Manifest, error) {
	lim = lim.withDefaults()
	lr := &boundedReader{r: r, left: lim.MaxManifestBytes}
	m, err := decodeManifest(lr, lim)
	switch {
	case lr.err != nil:
		return nil, lr.err
	case lr.over:
		return nil, tooLarge(ManifestName, "over the %d-byte limit", lim.MaxManifestBytes)
	case err != nil && !errors.Is(err, ErrCorrupt):
		return nil, parseErr(ManifestName, err)
	}
	return m, err
}

// boundedReader reads at most left bytes of r and remembers whether r had
// more, and the first error of r other than io.EOF.
type boundedReader struct {
	r    io.Reader
	left int64
	over bool
	err  error
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.left <= 0 {
		var one [1]byte
		n, err := io.ReadFull(b.r, one[:])
		if n > 0 {
			b.over = true
			return 0, errors.New("over the limit")
		}
		if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
			b.err = err
		}
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	if err != nil && err != io.EOF && b.err == nil {
		b.err = err
	}
	return n, err
}
