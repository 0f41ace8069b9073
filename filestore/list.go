package filestore

import (
	"context"
	"fmt"
	"io/fs"
	"iter"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/tidemark-io/tidemark/blobstore"
)

// List yields every object whose key starts with prefix, in lexicographic
// byte order of the whole key, as S3 orders them.
//
// A directory walk in name order is not byte order of keys: "a/b-c" sorts
// before "a/b/x" because '-' < '/', yet the file "b-c" sorts after the
// directory "b". So List reads one directory at a time, sorts its entries
// with each directory compared as its name plus "/", and descends in that
// order. It streams: memory is one directory listing per level of depth,
// not the whole tree. The walk starts at the deepest directory the prefix
// names. Temporary files, symbolic links and names no key could produce
// are skipped.
func (s *Store) List(ctx context.Context, prefix string) iter.Seq2[blobstore.ObjectInfo, error] {
	return func(yield func(blobstore.ObjectInfo, error) bool) {
		fail := func(err error) {
			yield(blobstore.ObjectInfo{}, fmt.Errorf("filestore: list %q: %w", prefix, err))
		}
		if err := blobstore.ValidatePrefix(prefix); err != nil {
			fail(err)
			return
		}
		if err := ctx.Err(); err != nil {
			fail(err)
			return
		}
		root, err := s.openRoot(false)
		if err != nil {
			if !isMissing(err) {
				fail(err)
			}
			return
		}
		defer root.Close()

		// Split the prefix into whole segments, which name the directory
		// to start from, and the partial segment after the last '/',
		// which filters names inside it.
		keyPrefix, partial := "", prefix
		start := root
		if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
			keyPrefix, partial = prefix[:i+1], prefix[i+1:]
			dir, err := openDir(root, path.Join(keyComponents(prefix[:i])...))
			if err != nil {
				if !isMissing(err) {
					fail(err)
				}
				return
			}
			defer dir.Close()
			start = dir
		}
		w := walker{ctx: ctx, yield: yield, fail: fail}
		w.walk(start, keyPrefix, partial, false)
	}
}

type walker struct {
	ctx   context.Context
	yield func(blobstore.ObjectInfo, error) bool
	fail  func(error)
}

// entryKind is how a directory entry maps to keys.
type entryKind int

const (
	entryFile  entryKind = iota // the key keyPrefix+frag
	entryDir                    // keys keyPrefix+frag+"/"...
	entryPiece                  // keys keyPrefix+frag..., the segment continues
)

type entry struct {
	name string // on disk
	frag string // what it adds to the key
	kind entryKind
	info fs.FileInfo
}

// sortKey orders entries as their keys order: every key under an entry
// starts with its sortKey, and no sibling's sortKey falls among them (see
// the comment on pieceLen).
func (e entry) sortKey() string {
	if e.kind == entryDir {
		return e.frag + "/"
	}
	return e.frag
}

// walk yields the keys under dir, which all start with keyPrefix, whose
// next part starts with partial. inPiece says that dir is a piece
// directory of a long segment, which holds only further pieces and the
// segment's last part. It returns false when the caller must stop.
func (w *walker) walk(dir *os.Root, keyPrefix, partial string, inPiece bool) bool {
	if err := w.ctx.Err(); err != nil {
		w.fail(err)
		return false
	}
	entries, err := readEntries(dir, partial, inPiece)
	if err != nil {
		w.fail(err)
		return false
	}
	for _, e := range entries {
		if err := w.ctx.Err(); err != nil {
			w.fail(err)
			return false
		}
		switch e.kind {
		case entryFile:
			key := keyPrefix + e.frag
			if blobstore.ValidateKey(key) != nil {
				continue
			}
			if !w.yield(objectInfo(key, e.info), nil) {
				return false
			}
		case entryDir, entryPiece:
			sub, err := dir.OpenRoot(e.name)
			if err != nil {
				if isMissing(err) {
					continue // removed since we read the directory
				}
				w.fail(err)
				return false
			}
			var ok bool
			if e.kind == entryDir {
				ok = w.walk(sub, keyPrefix+e.frag+"/", "", false)
			} else {
				// Within a piece the partial prefix may go on.
				rest := ""
				if len(partial) > len(e.frag) {
					rest = partial[len(e.frag):]
				}
				ok = w.walk(sub, keyPrefix+e.frag, rest, true)
			}
			sub.Close()
			if !ok {
				return false
			}
		}
	}
	return true
}

// readEntries reads dir, keeps the entries that can hold keys matching
// partial, and sorts them in key order.
func readEntries(dir *os.Root, partial string, inPiece bool) ([]entry, error) {
	d, err := dir.Open(".")
	if err != nil {
		return nil, err
	}
	des, err := d.ReadDir(-1)
	d.Close()
	if err != nil {
		return nil, err
	}
	entries := make([]entry, 0, len(des))
	for _, de := range des {
		e, ok := classify(de, inPiece)
		if !ok {
			continue
		}
		// Keep e if all its keys match partial, or (a piece) some may.
		if !strings.HasPrefix(e.frag, partial) && (e.kind != entryPiece || !strings.HasPrefix(partial, e.frag)) {
			continue
		}
		if e.kind == entryFile {
			if e.info, err = de.Info(); err != nil {
				if isMissing(err) {
					continue
				}
				return nil, err
			}
		}
		entries = append(entries, e)
	}
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.sortKey(), b.sortKey()) })
	return entries, nil
}

// classify maps a directory entry to the keys it holds, and rejects what
// filestore does not write there: temporary files, symbolic links,
// devices, and names no valid key encodes to.
func classify(de fs.DirEntry, inPiece bool) (entry, bool) {
	name := de.Name()
	var isDir bool
	switch {
	case de.Type().IsRegular():
	case de.IsDir():
		isDir = true
	default:
		return entry{}, false
	}
	if strings.HasSuffix(name, contMark) {
		frag := strings.TrimSuffix(name, contMark)
		return entry{name: name, frag: frag, kind: entryPiece}, isDir && len(frag) == pieceLen
	}
	kind := entryFile
	if isDir {
		kind = entryDir
	}
	if inPiece {
		// Only the segment's last part (possibly empty) may sit next to
		// further pieces.
		frag, ok := strings.CutSuffix(name, lastMark)
		return entry{name: name, frag: frag, kind: kind}, ok && len(frag) < pieceLen
	}
	if len(name) >= pieceLen || blobstore.ValidateKey(name) != nil {
		return entry{}, false
	}
	return entry{name: name, frag: name, kind: kind}, true
}
