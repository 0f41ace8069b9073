package state

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/tidemark-io/tidemark/internal/pebblefile"
	"github.com/tidemark-io/tidemark/internal/walk"
)

// FileKind says how a file of a checkpoint may be stored.
type FileKind int

const (
	// Private files belong to one checkpoint: MANIFEST-*, OPTIONS-*, WAL
	// (*.log) and marker files, which Pebble rewrites, appends to or
	// recycles. They are uploaded with every checkpoint.
	Private FileKind = iota
	// Immutable files (Pebble SSTs *.sst and blob files *.blob) are never
	// modified once written; a later checkpoint that still has one can
	// share the copy an earlier checkpoint uploaded.
	Immutable
)

// String returns "private" or "immutable".
func (k FileKind) String() string {
	switch k {
	case Private:
		return "private"
	case Immutable:
		return "immutable"
	default:
		return fmt.Sprintf("FileKind(%d)", int(k))
	}
}

// Classify returns the kind of the checkpoint file at relPath ('/' or
// OS-separated; only the base name matters). A file is Immutable only
// when its name is a Pebble table or blob file name (digits, then ".sst"
// or ".blob"); everything else is Private, which is always safe: a private
// file is merely uploaded again.
func Classify(relPath string) FileKind {
	if pebblefile.Immutable(relPath) {
		return Immutable
	}
	return Private
}

// FileInfo describes one file of a checkpoint directory.
type FileInfo struct {
	// RelPath is the path relative to the listed directory, with '/'
	// separators, for example "op-1/000007.sst".
	RelPath string
	// Size is the file size in bytes.
	Size int64
	// Kind is Classify(RelPath).
	Kind FileKind
}

// ListFiles returns every regular file under dir, sorted by RelPath. It
// refuses (ErrUnsupportedFile) symlinks, devices, sockets and pipes, which
// a Pebble checkpoint never contains and which could make an uploader read
// outside the checkpoint.
func ListFiles(dir string) ([]FileInfo, error) {
	walked, err := walk.RegularFiles(dir)
	if errors.Is(err, walk.ErrNotRegular) {
		err = fmt.Errorf("%w: %w", ErrUnsupportedFile, err)
	}
	if err != nil {
		return nil, fmt.Errorf("state: list files %q: %w", dir, err)
	}
	files := make([]FileInfo, 0, len(walked))
	for _, f := range walked {
		files = append(files, FileInfo{RelPath: f.Rel, Size: f.Info.Size(), Kind: Classify(f.Rel)})
	}
	return files, nil
}

// DigestFile returns the SHA-256 and size of the file at p, checking ctx
// between reads.
func DigestFile(ctx context.Context, p string) (digest [sha256.Size]byte, size int64, err error) {
	f, err := os.Open(p)
	if err != nil {
		return digest, 0, fmt.Errorf("state: digest %q: %w", p, err)
	}
	defer f.Close()
	h := sha256.New()
	buf := make([]byte, 256<<10)
	for {
		if err := ctx.Err(); err != nil {
			return digest, 0, fmt.Errorf("state: digest %q: %w", p, err)
		}
		n, rerr := f.Read(buf)
		h.Write(buf[:n])
		size += int64(n)
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return digest, 0, fmt.Errorf("state: digest %q: %w", p, rerr)
		}
	}
	copy(digest[:], h.Sum(nil))
	return digest, size, nil
}
