package main

import (
	"errors"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
)

// newDirs is what opening a file:// store is about to create: the
// directories of its path that do not exist yet, outermost first. A
// command that then fails (a damaged savepoint copied or restored into a
// new directory) removes them again with undo, so that it leaves nothing
// behind: opening a file store creates its directory, before anything is
// known to be worth writing.
type newDirs []string

// dirsToCreate returns the directories of storeURL's path that do not
// exist (none for another scheme, or when the directory is there).
func dirsToCreate(storeURL string) newDirs {
	u, err := url.Parse(storeURL)
	if err != nil || u.Scheme != "file" || (u.Host != "" && u.Host != "localhost") {
		return nil
	}
	dir := u.Path
	if u.Opaque != "" {
		dir = u.Opaque
	}
	if dir == "" {
		return nil
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return nil
	}
	var dirs newDirs
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); !errors.Is(err, fs.ErrNotExist) {
			break
		}
		dirs = append(newDirs{d}, dirs...)
		if filepath.Dir(d) == d {
			break
		}
	}
	return dirs
}

// undo removes the directories d names, innermost first, with the empty
// directories below them; a directory that holds a file stays (and so
// does every one above it).
func (d newDirs) undo() {
	if len(d) == 0 {
		return
	}
	removeEmpty(d[len(d)-1])
	for i := len(d) - 2; i >= 0; i-- {
		if os.Remove(d[i]) != nil {
			return
		}
	}
}

// removeEmpty removes dir if, once its empty subdirectories are removed,
// it is empty; it reports whether it did.
func removeEmpty(dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if !e.IsDir() || !removeEmpty(filepath.Join(dir, e.Name())) {
			return false
		}
	}
	return os.Remove(dir) == nil
}
