package filestore

import (
	"context"
	"fmt"
	"io/fs"
	"iter"
	"os"
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
			dir, err := openDir(root, prefix[:i])
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
		w.walk(start, keyPrefix, partial)
	}
}

type walker struct {
	ctx   context.Context
	yield func(blobstore.ObjectInfo, error) bool
	fail  func(error)
}

type entry struct {
	name  string // on disk, and the key segment it holds
	isDir bool
	info  fs.FileInfo
}

// sortKey orders entries as their keys order: every key under a directory
// d starts with d+"/", so comparing directories as name+"/" puts "b-c"
// before "b/x" as byte order of keys demands.
func (e entry) sortKey() string {
	if e.isDir {
		return e.name + "/"
	}
	return e.name
}

// walk yields the keys under dir, which all start with keyPrefix, whose
// next segment starts with partial. It returns false when the caller must
// stop.
func (w *walker) walk(dir *os.Root, keyPrefix, partial string) bool {
	if err := w.ctx.Err(); err != nil {
		w.fail(err)
		return false
	}
	entries, err := readEntries(dir, partial)
	if err != nil {
		w.fail(err)
		return false
	}
	for _, e := range entries {
		if err := w.ctx.Err(); err != nil {
			w.fail(err)
			return false
		}
		if !e.isDir {
			key := keyPrefix + e.name
			if blobstore.ValidateKey(key) != nil {
				continue
			}
			if !w.yield(objectInfo(key, e.info), nil) {
				return false
			}
			continue
		}
		sub, err := dir.OpenRoot(e.name)
		if err != nil {
			if isMissing(err) {
				continue // removed since we read the directory
			}
			w.fail(err)
			return false
		}
		ok := w.walk(sub, keyPrefix+e.name+"/", "")
		sub.Close()
		if !ok {
			return false
		}
	}
	return true
}

// readEntries reads dir, keeps the entries that can hold keys matching
// partial, and sorts them in key order. A directory removed since it was
// opened (a delete beside the listing) holds nothing.
func readEntries(dir *os.Root, partial string) ([]entry, error) {
	d, err := dir.Open(".")
	if isMissing(err) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	des, err := d.ReadDir(-1)
	d.Close()
	if isMissing(err) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	entries := make([]entry, 0, len(des))
	for _, de := range des {
		e, ok := classify(de)
		if !ok || !strings.HasPrefix(e.name, partial) {
			continue
		}
		if !e.isDir {
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
// devices, and names no valid key segment can be.
func classify(de fs.DirEntry) (entry, bool) {
	name := de.Name()
	if !de.Type().IsRegular() && !de.IsDir() {
		return entry{}, false
	}
	if blobstore.ValidateKey(name) != nil {
		return entry{}, false
	}
	return entry{name: name, isDir: de.IsDir()}, true
}
