package archive

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"syscall"
)

// ExtractDir extracts the archive in r into dir, which must not exist or
// must be an empty directory; each file is written at dir/<its path> (so
// under dir/state/<owner>/). Its parent directories are created as needed.
//
// Files are written into a temporary sibling of dir (".<name>.tmp-*"),
// every file and directory is fsynced, and only when the whole archive has
// been verified is the temporary directory renamed to dir and the parent
// fsynced. A refused or failed extraction removes the temporary directory
// and leaves dir as it was, so a crash or a hostile archive never leaves a
// half-written state directory that could be mistaken for a good one.
// All writes go through an os.Root on the temporary directory, a second
// line of defence behind path validation.
//
// A dir that exists and is not empty fails with an error wrapping
// fs.ErrExist, before anything is read.
func ExtractDir(ctx context.Context, r io.Reader, dir string, lim Limits) (m *Manifest, err error) {
	dir = filepath.Clean(dir)
	if err := checkEmptyOrAbsent(dir); err != nil {
		return nil, err
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("archive: extract %q: %w", dir, err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("archive: extract %q: %w", dir, err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	root, err := os.OpenRoot(tmp)
	if err != nil {
		return nil, fmt.Errorf("archive: extract %q: %w", dir, err)
	}
	defer root.Close()

	dirs := map[string]struct{}{".": {}}
	m, err = Read(ctx, r, lim, func(f File, r io.Reader) error {
		d := path.Dir(f.Path)
		if _, ok := dirs[d]; !ok {
			if err := root.MkdirAll(filepath.FromSlash(d), 0o755); err != nil {
				return err
			}
			for ; d != "."; d = path.Dir(d) {
				dirs[d] = struct{}{}
			}
		}
		return writeFileIn(root, f.Path, r)
	})
	if err != nil {
		return nil, fmt.Errorf("archive: extract %q: %w", dir, err)
	}

	// Directory entries must be durable before the rename publishes them,
	// deepest first so each directory is synced after its children.
	names := make([]string, 0, len(dirs))
	for d := range dirs {
		names = append(names, d)
	}
	slices.SortFunc(names, func(a, b string) int { return len(b) - len(a) })
	for _, d := range names {
		if err := syncDir(root, d); err != nil {
			return nil, fmt.Errorf("archive: extract %q: sync %q: %w", dir, d, err)
		}
	}
	// rename(2) itself, not os.Rename: it atomically replaces an empty
	// directory (os.Rename refuses any existing directory) and fails if
	// dir was filled meanwhile.
	if err := syscall.Rename(tmp, dir); err != nil {
		return nil, fmt.Errorf("archive: extract %q: %w", dir, &os.LinkError{Op: "rename", Old: tmp, New: dir, Err: err})
	}
	// The rename is durable only once the parent directory is synced. The
	// extraction is complete either way; report a failure so the caller
	// does not rely on it surviving a crash.
	if err := syncPath(parent); err != nil {
		return m, fmt.Errorf("archive: extract %q: sync parent: %w", dir, err)
	}
	return m, nil
}

func checkEmptyOrAbsent(dir string) error {
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("archive: extract %q: %w", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("archive: extract %q: exists and is not a directory: %w", dir, fs.ErrExist)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("archive: extract %q: %w", dir, err)
	}
	defer d.Close()
	if _, err := d.Readdirnames(1); err != io.EOF {
		if err == nil {
			return fmt.Errorf("archive: extract %q: directory not empty: %w", dir, fs.ErrExist)
		}
		return fmt.Errorf("archive: extract %q: %w", dir, err)
	}
	return nil
}

func writeFileIn(root *os.Root, name string, r io.Reader) (err error) {
	// O_EXCL: the manifest has no duplicates, so an existing file means
	// something is wrong; never write through whatever is there.
	f, err := root.OpenFile(filepath.FromSlash(name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	if _, err := io.Copy(f, r); err != nil {
		return err
	}
	return f.Sync()
}

func syncDir(root *os.Root, name string) error {
	d, err := root.Open(filepath.FromSlash(name))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func syncPath(name string) error {
	d, err := os.Open(name)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
