package archive

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/tidemark-io/tidemark/blobstore"
)

// FormatVersion is the archive format version this package writes and the
// only one it reads.
const FormatVersion = 1

// ManifestName is the name of the first entry of every archive.
const ManifestName = "MANIFEST.json"

// StatePrefix is the directory every file of an archive lives under:
// paths are StatePrefix + "<owner>/" + the file's path in that owner's
// state directory.
const StatePrefix = "state/"

var (
	// ErrCorrupt is wrapped by every refusal of archive content: a damaged,
	// truncated, hostile or simply non-conforming archive. The message
	// names the entry concerned. Write also returns it when a source file
	// does not match the manifest it was asked to write.
	ErrCorrupt = errors.New("archive: corrupt")
	// ErrTooLarge is wrapped, together with ErrCorrupt, by refusals caused
	// by Limits, so that callers can tell "bigger than we accept" from
	// "damaged" if they want to.
	ErrTooLarge = errors.New("archive: over limit")
)

// File describes one file of an archive.
type File struct {
	// Path is relative and '/'-separated, under StatePrefix.
	Path string `json:"path"`
	// Size is the length of the content in bytes.
	Size int64 `json:"size"`
	// SHA256 is the hex-encoded (lower case) SHA-256 of the content.
	SHA256 string `json:"sha256"`
}

// Manifest is the first entry of an archive. It describes everything the
// archive holds; a reader accepts exactly what it lists.
type Manifest struct {
	// Version is the format version, FormatVersion.
	Version int `json:"version"`
	// Record is the checkpoint record, opaque to this package. It must be
	// valid JSON and not null.
	Record json.RawMessage `json:"record"`
	// Files are the archive's files in the order they are stored.
	Files []File `json:"files"`
}

// TotalSize returns the sum of the sizes of m's files. It is meaningful
// only for a manifest that passed validation (no negative sizes, no
// overflow).
func (m *Manifest) TotalSize() int64 {
	var t int64
	for _, f := range m.Files {
		t += f.Size
	}
	return t
}

// Limits bound what Read, Verify and ExtractDir accept, so that a hostile
// archive cannot exhaust memory or disk. A zero field takes its default;
// set a field to math.MaxInt64 (math.MaxInt for MaxFiles) to lift it.
type Limits struct {
	// MaxTotalBytes bounds the sum of the file sizes. The declared total
	// is checked against it before any file is read, and the bytes
	// actually read can never exceed the declared sizes.
	// Default: DefaultMaxTotalBytes (256 GiB).
	MaxTotalBytes int64
	// MaxFiles bounds the number of files. Default: DefaultMaxFiles
	// (1,000,000).
	MaxFiles int
	// MaxManifestBytes bounds the size of MANIFEST.json, which is the only
	// thing held in memory whole. Default: DefaultMaxManifestBytes
	// (64 MiB, enough for several hundred thousand files).
	MaxManifestBytes int64
}

// Default limits, used for zero fields of Limits.
const (
	DefaultMaxTotalBytes    int64 = 256 << 30
	DefaultMaxFiles               = 1_000_000
	DefaultMaxManifestBytes int64 = 64 << 20
)

func (l Limits) withDefaults() Limits {
	if l.MaxTotalBytes <= 0 {
		l.MaxTotalBytes = DefaultMaxTotalBytes
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = DefaultMaxFiles
	}
	if l.MaxManifestBytes <= 0 {
		l.MaxManifestBytes = DefaultMaxManifestBytes
	}
	return l
}

// corrupt returns an error wrapping ErrCorrupt that names entry.
func corrupt(entry, format string, args ...any) error {
	return fmt.Errorf("%w: entry %q: %s", ErrCorrupt, entry, fmt.Sprintf(format, args...))
}

// tooLarge returns an error wrapping ErrCorrupt and ErrTooLarge that names
// entry.
func tooLarge(entry, format string, args ...any) error {
	return fmt.Errorf("%w: entry %q: %w: %s", ErrCorrupt, entry, ErrTooLarge, fmt.Sprintf(format, args...))
}

// MaxSegmentLen is the longest path segment, in bytes, an archive may
// hold: the file name limit of common file systems, so that every archive
// Verify accepts can also be extracted.
const MaxSegmentLen = 255

// ValidatePath reports whether p may name a file in an archive: a valid
// blobstore key (see blobstore.ValidateKey) with no backslash and no
// segment longer than MaxSegmentLen, under StatePrefix with an owner
// segment and at least one more segment. The error wraps ErrCorrupt and
// blobstore.ErrInvalidKey.
func ValidatePath(p string) error {
	if err := blobstore.ValidateKey(p); err != nil {
		return fmt.Errorf("%w: entry %q: %w", ErrCorrupt, p, err)
	}
	// Backslashes are legal in keys but are separators on Windows, where
	// "state/a/..\\..\\x" would climb out of the destination.
	if strings.ContainsRune(p, '\\') {
		return fmt.Errorf("%w: entry %q: %w: contains a backslash", ErrCorrupt, p, blobstore.ErrInvalidKey)
	}
	for seg := range strings.SplitSeq(p, "/") {
		if len(seg) > MaxSegmentLen {
			return fmt.Errorf("%w: entry %q: %w: a segment is %d bytes, over the %d-byte limit", ErrCorrupt, p, blobstore.ErrInvalidKey, len(seg), MaxSegmentLen)
		}
	}
	rest, ok := strings.CutPrefix(p, StatePrefix)
	if !ok || !strings.Contains(rest, "/") {
		return fmt.Errorf("%w: entry %q: %w: not under %s<owner>/", ErrCorrupt, p, blobstore.ErrInvalidKey, StatePrefix)
	}
	return nil
}

// validateManifest checks everything about m that does not depend on
// limits: version, record, and every file's path, size and digest, no
// duplicates, and no path that is also the directory of another path
// (which could not be extracted). It returns the total size.
func validateManifest(m *Manifest) (int64, error) {
	if m.Version != FormatVersion {
		return 0, corrupt(ManifestName, "unknown format version %d (this reader knows %d)", m.Version, FormatVersion)
	}
	rec := strings.TrimSpace(string(m.Record))
	if rec == "" || rec == "null" {
		return 0, corrupt(ManifestName, "no checkpoint record")
	}
	if !json.Valid(m.Record) {
		return 0, corrupt(ManifestName, "checkpoint record is not valid JSON")
	}
	files := make(map[string]struct{}, len(m.Files))
	var total int64
	for _, f := range m.Files {
		if err := ValidatePath(f.Path); err != nil {
			return 0, err
		}
		if _, dup := files[f.Path]; dup {
			return 0, corrupt(f.Path, "listed twice in the manifest")
		}
		files[f.Path] = struct{}{}
		if f.Size < 0 {
			return 0, corrupt(f.Path, "negative size %d in the manifest", f.Size)
		}
		if f.Size > math.MaxInt64-total {
			return 0, corrupt(f.Path, "total size overflows")
		}
		total += f.Size
		if !validDigest(f.SHA256) {
			return 0, corrupt(f.Path, "sha256 %q is not 64 lower-case hex digits", f.SHA256)
		}
	}
	// A file "a/b" and a file "a/b/c" cannot both exist on disk.
	for _, f := range m.Files {
		for i := strings.IndexByte(f.Path, '/'); i >= 0; i = nextSlash(f.Path, i) {
			if _, ok := files[f.Path[:i]]; ok {
				return 0, corrupt(f.Path[:i], "is both a file and the directory of %q", f.Path)
			}
		}
	}
	return total, nil
}

func nextSlash(s string, i int) int {
	j := strings.IndexByte(s[i+1:], '/')
	if j < 0 {
		return -1
	}
	return i + 1 + j
}

func validDigest(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
