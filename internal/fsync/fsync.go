// Package fsync makes directory changes durable: the one implementation of
// fsyncing a directory, a tree of them, and creating directories durably,
// which every package of Tidemark that writes local files uses.
//
// A file's own fsync makes its bytes durable, not its name: creating,
// renaming or removing an entry dirties only the directory, and a crash
// can lose the entry (and with it everything synced inside it) unless the
// directory is fsynced too.
package fsync

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// Dir fsyncs the directory dir, making the creation, removal and renaming
// of its entries durable.
func Dir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		_ = d.Close()
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return d.Close()
}

// Tree fsyncs every directory under root, root included, so that a tree
// whose files were synced one by one is durable as a whole before it is
// renamed into place. Only their completion before that rename matters,
// so the fsyncs run in parallel (treeConcurrency at a time): the file
// system batches them into fewer journal commits.
func Tree(root string) error {
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		next     = make(chan string)
	)
	for range min(treeConcurrency, len(dirs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d := range next {
				if err := Dir(d); err != nil {
					mu.Lock()
					firstErr = cmp.Or(firstErr, err)
					mu.Unlock()
				}
			}
		}()
	}
	for _, d := range dirs {
		next <- d
	}
	close(next)
	wg.Wait()
	return firstErr
}

// treeConcurrency is how many directory fsyncs Tree runs at once.
const treeConcurrency = 32

// MkdirAll creates dir and its missing parents and fsyncs the parent of
// every directory it created (up to the closest ancestor that existed), so
// that the new path survives a crash.
func MkdirAll(dir string, perm fs.FileMode) error {
	var created []string
	for p := filepath.Clean(dir); ; p = filepath.Dir(p) {
		_, err := os.Stat(p)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		created = append(created, p)
		if filepath.Dir(p) == p {
			break
		}
	}
	if len(created) == 0 {
		return nil
	}
	if err := os.MkdirAll(dir, perm); err != nil {
		return err
	}
	// Shallowest first: a parent's entry is durable before its child's.
	for i := len(created) - 1; i >= 0; i-- {
		if err := Dir(filepath.Dir(created[i])); err != nil {
			return err
		}
	}
	return nil
}
