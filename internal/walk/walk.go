// Package walk lists the regular files of a directory tree: the one walker
// behind state.ListFiles and blobstorage's Save, which refuse anything
// else a checkpoint could not carry or restore as it was.
package walk

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ErrNotRegular is wrapped by RegularFiles for a symbolic link, device,
// socket or pipe in the tree (a checkpoint never holds one, and following
// one could make an uploader read outside the tree), and for a root that
// is not a directory.
var ErrNotRegular = errors.New("not a regular file or directory")

// File is one regular file of a tree.
type File struct {
	// Rel is the path relative to the root, with '/' separators.
	Rel string
	// Path is the path to open (the root joined with Rel).
	Path string
	// Info is the file's Lstat.
	Info fs.FileInfo
}

// RegularFiles returns every regular file under root, sorted by Rel. It
// fails, wrapping ErrNotRegular, on any entry that is neither a regular
// file nor a directory, and on a root that is not a directory.
func RegularFiles(root string) ([]File, error) {
	st, err := os.Lstat(root)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s is not a directory: %w", root, ErrNotRegular)
	}
	var files []File
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if !d.Type().IsRegular() {
			return fmt.Errorf("%q is a %v: %w", rel, d.Type(), ErrNotRegular)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		files = append(files, File{Rel: rel, Path: p, Info: info})
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Rel, b.Rel) })
	return files, nil
}
