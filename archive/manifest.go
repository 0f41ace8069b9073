package archive

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

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

// RemotePrefix is the directory of the objects of state in remote mode
// (Pebble tables kept in the object store rather than in the state
// directory) that an archive carries so as to be self-contained: paths
// RemotePrefix + "<owner>/" + the rest of the object's key, which is the
// path itself (blobstorage keeps them under "remote/"). Extracting such
// an archive puts the objects back into a store under the same keys.
const RemotePrefix = "remote/"

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
	// Path is relative and '/'-separated, under StatePrefix (or
	// RemotePrefix).
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

// Limits bound what the reader accepts (Read, Verify, NewReader,
// ExtractDir, ExtractRoot) and what Write agrees to produce, so that a
// hostile archive cannot exhaust memory, disk or CPU. A zero field takes
// its default; set a field to math.MaxInt64 (math.MaxInt for MaxFiles) to
// lift it. Whatever the limits, nothing is ever allocated from a size an
// archive declares: memory grows only with bytes actually read.
//
// Memory. The reader holds the decoded manifest and little else: 104
// bytes per file plus its path (40 for the File, 64 for the digest, the
// strings packed into shared chunks), which is about the manifest's own
// JSON size (at least 106 bytes per file); while the file list is being
// decoded the File values exist twice (chunks, then the final slice), and
// duplicates are checked through a sorted 4-byte index. With the garbage
// collector's headroom, the peak heap of a read is at most 3 ×
// MaxManifestBytes + 16 MiB (the zstd window, at most 8 MiB, and ~1 MiB of
// buffers included): 192 MiB + 16 MiB with the defaults. A test measures
// it on the largest manifest the defaults allow (616,117 files in 64 MiB):
// 1.9 times the manifest (see TestPeakHeapReadingLargestManifest).
// ExtractDir adds about 50 bytes per distinct directory. MaxFiles,
// MaxTotalBytes and MaxExpansion cost no memory; they bound work and disk.
type Limits struct {
	// MaxTotalBytes bounds the sum of the file sizes, which is what
	// ExtractDir writes to disk and what Verify hashes. The declared
	// total is checked against it before any file is read, and the bytes
	// actually read can never exceed the declared sizes.
	// Default: DefaultMaxTotalBytes (256 GiB).
	MaxTotalBytes int64
	// MaxFiles bounds the number of files, counted while the manifest is
	// decoded. Default: DefaultMaxFiles (1,000,000; a manifest of
	// MaxManifestBytes holds at most about 633,000).
	MaxFiles int
	// MaxManifestBytes bounds the size of MANIFEST.json, checked against
	// its tar header before a byte of it is read. It is what bounds the
	// reader's memory (see above). Default: DefaultMaxManifestBytes
	// (64 MiB, about 600,000 files with short paths).
	MaxManifestBytes int64
	// MaxExpansion bounds the work a zstd-compressed archive can cause:
	// the decompressed stream may not exceed MaxExpansion times the
	// compressed bytes read so far plus ExpansionAllowance. Past that the
	// archive is refused (ErrTooLarge), so an input of n bytes makes the
	// reader produce (and hash, and write) at most MaxExpansion × n +
	// ExpansionAllowance bytes. Real archives stay far below: state files
	// are mostly compressed already, and tar headers and manifests
	// compress 3–20×. Default: DefaultMaxExpansion (128).
	MaxExpansion int64
}

// Default limits, used for zero fields of Limits.
const (
	DefaultMaxTotalBytes    int64 = 256 << 30
	DefaultMaxFiles               = 1_000_000
	DefaultMaxManifestBytes int64 = 64 << 20
	DefaultMaxExpansion     int64 = 128
)

// ExpansionAllowance is how many decompressed bytes a zstd archive may
// produce beyond MaxExpansion times its compressed size, so that small
// archives of very compressible data (empty files, zero-filled files) are
// never refused: at most this much work is done on any input, however
// small.
const ExpansionAllowance int64 = 64 << 20

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
	if l.MaxExpansion <= 0 {
		l.MaxExpansion = DefaultMaxExpansion
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
// segment longer than MaxSegmentLen, under StatePrefix (or RemotePrefix)
// with an owner segment and at least one more segment. The error wraps
// ErrCorrupt and blobstore.ErrInvalidKey.
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
	if !ok {
		rest, ok = strings.CutPrefix(p, RemotePrefix)
	}
	if !ok || !strings.Contains(rest, "/") {
		return fmt.Errorf("%w: entry %q: %w: not under %s<owner>/", ErrCorrupt, p, blobstore.ErrInvalidKey, StatePrefix)
	}
	return nil
}

// validateManifest checks everything about m that does not depend on
// limits: version, record, and every file's path, size and digest, no
// duplicates, and no path that is also the directory of another path
// (which could not be extracted). It returns the total size. Write uses
// it; the reader applies the same checks (validateRecord, validateFile,
// checkLayout) while it decodes.
func validateManifest(m *Manifest) (int64, error) {
	if m.Version != FormatVersion {
		return 0, corrupt(ManifestName, "unknown format version %d (this reader knows %d)", m.Version, FormatVersion)
	}
	if err := validateRecord(m.Record); err != nil {
		return 0, err
	}
	var total int64
	for _, f := range m.Files {
		var err error
		if total, err = validateFile(f, total); err != nil {
			return 0, err
		}
	}
	if err := checkLayout(m.Files); err != nil {
		return 0, err
	}
	return total, nil
}

// validateRecord checks the checkpoint record: present, not null, valid
// JSON and valid UTF-8 (a JSON decoder would silently replace invalid
// bytes, so the record read back would differ from the one written).
func validateRecord(rec json.RawMessage) error {
	if s := bytes.TrimSpace(rec); len(s) == 0 || string(s) == "null" {
		return corrupt(ManifestName, "no checkpoint record")
	}
	if !utf8.Valid(rec) {
		return corrupt(ManifestName, "checkpoint record is not valid UTF-8")
	}
	if !json.Valid(rec) {
		return corrupt(ManifestName, "checkpoint record is not valid JSON")
	}
	return nil
}

// validateFile checks one file's path, size and digest; total is the sum
// of the sizes before f, and the new sum is returned.
func validateFile(f File, total int64) (int64, error) {
	if err := ValidatePath(f.Path); err != nil {
		return 0, err
	}
	if f.Size < 0 {
		return 0, corrupt(f.Path, "negative size %d in the manifest", f.Size)
	}
	if f.Size > math.MaxInt64-total {
		return 0, corrupt(f.Path, "total size overflows")
	}
	if !validDigest(f.SHA256) {
		return 0, corrupt(f.Path, "sha256 %q is not 64 lower-case hex digits", f.SHA256)
	}
	return total + f.Size, nil
}

// checkLayout refuses duplicate paths and a path that is also the
// directory of another ("a/b" and "a/b/c" cannot both exist on disk).
// It sorts an index of 4 bytes per file instead of building a map of
// every path, so that it costs almost nothing on top of the manifest.
//
// The order compares '/' below every other byte (paths hold no control
// characters), so the paths under "a/b/" sort right after "a/b" and
// before any "a/b<c>": a conflict is always between neighbours.
func checkLayout(files []File) error {
	if len(files) > math.MaxInt32 {
		return corrupt(ManifestName, "%d files", len(files))
	}
	idx := make([]int32, len(files))
	for i := range idx {
		idx[i] = int32(i)
	}
	slices.SortFunc(idx, func(a, b int32) int { return comparePaths(files[a].Path, files[b].Path) })
	for i := 1; i < len(idx); i++ {
		prev, p := files[idx[i-1]].Path, files[idx[i]].Path
		switch {
		case p == prev:
			return corrupt(p, "listed twice in the manifest")
		case len(p) > len(prev) && p[len(prev)] == '/' && strings.HasPrefix(p, prev):
			return corrupt(prev, "is both a file and the directory of %q", p)
		}
	}
	return nil
}

// comparePaths orders paths byte-wise, except that '/' sorts first.
func comparePaths(a, b string) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		return len(a) - len(b)
	}
	ca, cb := int(a[i]), int(b[i])
	if ca == '/' {
		ca = -1
	}
	if cb == '/' {
		cb = -1
	}
	return ca - cb
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
