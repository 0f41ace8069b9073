package archive

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sync"
	"syscall"
	"unicode/utf8"
)

// ExtractDir extracts the archive in r into dir, which must not exist or
// must be an empty directory; each file is written at dir/<its path> (so
// under dir/state/<owner>/). Missing parent directories of dir are
// created, and removed again if the extraction is refused.
//
// dir's parent is resolved once, when ExtractDir starts, and opened as an
// os.Root; everything after that happens relative to it, as ExtractRoot
// describes: the files are written into a temporary sibling of dir,
// verified and synced, and the temporary directory is renamed to dir only
// when the whole archive has been verified. A refused or failed
// extraction leaves the file system as it was.
//
// A dir that exists and is not empty fails with an error wrapping
// fs.ErrExist, before anything is read.
func ExtractDir(ctx context.Context, r io.Reader, dir string, lim Limits) (m *Manifest, err error) {
	dir = filepath.Clean(dir)
	base := filepath.Base(dir)
	if base == "." || base == string(filepath.Separator) || base == ".." {
		return nil, fmt.Errorf("archive: extract %q: not a directory name", dir)
	}
	if err := checkEmptyOrAbsent(dir); err != nil {
		return nil, fmt.Errorf("archive: extract %q: %w", dir, err)
	}
	created, err := mkdirAllTracked(filepath.Dir(dir))
	if err != nil {
		return nil, fmt.Errorf("archive: extract %q: %w", dir, err)
	}
	defer func() {
		if err != nil && m == nil {
			removeCreated(created)
		}
	}()
	root, err := os.OpenRoot(filepath.Dir(dir))
	if err != nil {
		return nil, fmt.Errorf("archive: extract %q: %w", dir, err)
	}
	defer root.Close()
	m, err = ExtractRoot(ctx, r, root, base, lim)
	if err != nil {
		return m, fmt.Errorf("archive: extract %q: %w", dir, err)
	}
	return m, nil
}

// ExtractRoot extracts the archive in r into root/name, as Reader.Extract
// does, after reading and checking the manifest with NewReader. It
// returns the manifest; with an error, the manifest is returned only if
// the extraction is complete and just its durability is in doubt.
func ExtractRoot(ctx context.Context, r io.Reader, root *os.Root, name string, lim Limits) (*Manifest, error) {
	if _, err := checkEmptyOrAbsentIn(root, name); err != nil {
		return nil, err
	}
	ar, err := NewReader(ctx, r, lim)
	if err != nil {
		return nil, err
	}
	defer ar.Close()
	if err := ar.Extract(ctx, root, name); err != nil {
		if errors.Is(err, errNotDurable) {
			return ar.Manifest(), err
		}
		return nil, err
	}
	return ar.Manifest(), nil
}

// errNotDurable is wrapped by the error of an extraction that is complete
// but whose final directory sync failed.
var errNotDurable = errors.New("extracted, but not durable")

// Extract reads the files into root/name, which must not exist or must be
// an empty directory; name is a local path within root whose parent
// exists. It is all or nothing, and race-safe:
//
//   - Nothing is created before the manifest has been checked (NewReader
//     did that), and no conflict can appear later: paths that collide or
//     nest, and names a file system refuses (segments over MaxSegmentLen,
//     control characters, invalid UTF-8) are refused in the manifest.
//     Names that differ only in case are distinct on Linux and accepted;
//     on a case-insensitive file system two files whose paths differ only
//     in case collide when the second is created (O_EXCL: fs.ErrExist),
//     and the extraction is refused like any other, leaving nothing.
//   - Files are written into a staging directory, a sibling of name
//     called .<name>.tmp-<random> (a crash can leave one behind), created
//     with Mkdir and opened as an os.Root of its own: every file and
//     directory is then created relative to that handle, never through a
//     path from the top, so replacing the staging directory, or any
//     directory in it, by a symbolic link cannot send a byte outside it.
//   - When the whole archive has been verified, every file and directory
//     is fsynced, and only then is the staging directory renamed to name
//     (after checking, before and after, that the name still refers to
//     the directory that was written) and its parent fsynced.
//
// A refused or failed extraction removes the staging directory and
// leaves root as it was. Extract may be called once, instead of
// ReadFiles.
func (ar *Reader) Extract(ctx context.Context, root *os.Root, name string) (err error) {
	if !filepath.IsLocal(name) {
		return fmt.Errorf("archive: extract %q: not a local path", name)
	}
	name = filepath.Clean(name)
	existed, err := checkEmptyOrAbsentIn(root, name)
	if err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(name), tempName(filepath.Base(name)))
	if err := root.Mkdir(tmp, 0o755); err != nil {
		return fmt.Errorf("archive: extract %q: %w", name, err)
	}
	stage, err := root.OpenRoot(tmp)
	if err != nil {
		root.Remove(tmp)
		return fmt.Errorf("archive: extract %q: %w", name, err)
	}
	defer stage.Close()
	ours, err := stage.Stat(".")
	if err == nil {
		err = sameDir(root, tmp, ours)
	}
	defer func() {
		if err != nil {
			discard(root, stage, tmp, ours)
		}
	}()
	if err != nil {
		return fmt.Errorf("archive: extract %q: %w", name, err)
	}

	// Many files are made durable by one syncfs of the staging
	// directory's file system, opened before anything is written so that
	// a writeback error during the extraction is reported (syncFSFiles).
	var fsys *os.File
	if haveSyncFS && len(ar.m.Files) >= syncFSFiles {
		if fsys, err = stage.Open("."); err != nil {
			return fmt.Errorf("archive: extract %q: %w", name, err)
		}
		defer fsys.Close()
	}

	// The directories to sync: every one that holds an extracted file,
	// and their ancestors; keys are substrings of the paths. Files are
	// created through a handle on their directory, opened once per run
	// of files in it, rather than resolving every path from the top.
	dirs := map[string]struct{}{".": {}}
	buf := make([]byte, 64<<10)
	lastDir, dirRoot := "", (*os.Root)(nil)
	defer func() {
		if dirRoot != nil {
			dirRoot.Close()
		}
	}()
	err = ar.ReadFiles(ctx, func(f File, r io.Reader) error {
		if d := path.Dir(f.Path); d != lastDir {
			if err := stage.MkdirAll(filepath.FromSlash(d), 0o755); err != nil {
				return err
			}
			if dirRoot != nil {
				dirRoot.Close()
				dirRoot = nil
			}
			dr, err := stage.OpenRoot(filepath.FromSlash(d))
			if err != nil {
				return err
			}
			dirRoot, lastDir = dr, d
			for ; d != "."; d = path.Dir(d) {
				if _, ok := dirs[d]; ok {
					break
				}
				dirs[d] = struct{}{}
			}
		}
		return writeFileIn(dirRoot, path.Base(f.Path), r, buf)
	})
	if err != nil {
		return err
	}
	// Files and directory entries must be durable before the rename
	// publishes them. Synced only now, so that a refused archive costs no
	// fsync.
	if fsys != nil {
		err = syncFS(fsys)
	} else {
		err = syncAll(ctx, stage, ar.m.Files, dirs)
	}
	if err != nil {
		return fmt.Errorf("archive: extract %q: %w", name, err)
	}

	if err := sameDir(root, tmp, ours); err != nil {
		return fmt.Errorf("archive: extract %q: %w", name, err)
	}
	if existed {
		// Root.Rename, like os.Rename, will not replace a directory.
		if err := root.Remove(name); err != nil {
			return fmt.Errorf("archive: extract %q: %w", name, err)
		}
	}
	if err := root.Rename(tmp, name); err != nil {
		if existed {
			root.Mkdir(name, 0o755)
		}
		return fmt.Errorf("archive: extract %q: %w", name, err)
	}
	if err := sameDir(root, name, ours); err != nil {
		// What was renamed is not what was written: someone swapped the
		// staging directory. Take back what was published.
		if fi, lerr := root.Lstat(name); lerr == nil && !os.SameFile(fi, ours) {
			root.Remove(name)
		}
		return fmt.Errorf("archive: extract %q: %w", name, err)
	}
	// The rename is durable only once the parent directory is synced.
	// The extraction is complete either way; report a failure so the
	// caller does not rely on it surviving a crash.
	if err := syncDir(root, filepath.Dir(name)); err != nil {
		return fmt.Errorf("archive: extract %q: sync parent: %w: %w", name, errNotDurable, err)
	}
	return nil
}

// tempName is the staging directory's name for a destination called
// base: short enough for any file system whatever base is.
func tempName(base string) string {
	if len(base) > 100 {
		i := 100
		for i > 0 && !utf8.RuneStart(base[i]) {
			i--
		}
		base = base[:i]
	}
	var b [8]byte
	rand.Read(b[:])
	return "." + base + ".tmp-" + hex.EncodeToString(b[:])
}

// sameDir checks that name in root is, still, the directory ours.
func sameDir(root *os.Root, name string, ours fs.FileInfo) error {
	fi, err := root.Lstat(name)
	if err != nil {
		return err
	}
	if !fi.IsDir() || !os.SameFile(fi, ours) {
		return fmt.Errorf("%s was replaced during extraction", name)
	}
	return nil
}

// discard removes what a refused extraction wrote: the staging
// directory's content through its own handle (wherever it is now), then
// the directory itself if tmp still names it.
func discard(root, stage *os.Root, tmp string, ours fs.FileInfo) {
	if d, err := stage.Open("."); err == nil {
		names, _ := d.Readdirnames(-1)
		d.Close()
		for _, n := range names {
			stage.RemoveAll(n)
		}
	}
	if ours == nil || sameDir(root, tmp, ours) == nil {
		root.Remove(tmp)
	}
}

// checkEmptyOrAbsent checks, by path, that dir does not exist or is an
// empty directory.
func checkEmptyOrAbsent(dir string) error {
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("exists and is not a directory: %w", fs.ErrExist)
	}
	return checkEmpty(os.Open(dir))
}

// checkEmptyOrAbsentIn is checkEmptyOrAbsent within root; it reports
// whether name exists.
func checkEmptyOrAbsentIn(root *os.Root, name string) (bool, error) {
	fi, err := root.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("archive: extract %q: %w", name, err)
	}
	if !fi.IsDir() {
		return true, fmt.Errorf("archive: extract %q: exists and is not a directory: %w", name, fs.ErrExist)
	}
	if err := checkEmpty(root.Open(name)); err != nil {
		return true, fmt.Errorf("archive: extract %q: %w", name, err)
	}
	return true, nil
}

func checkEmpty(d *os.File, err error) error {
	if err != nil {
		return err
	}
	defer d.Close()
	if _, err := d.Readdirnames(1); err != io.EOF {
		if err == nil {
			return fmt.Errorf("directory not empty: %w", fs.ErrExist)
		}
		return err
	}
	return nil
}

// mkdirAllTracked creates dir and its missing parents, returning the
// directories it created, outermost first.
func mkdirAllTracked(dir string) ([]string, error) {
	var missing []string
	for p := dir; ; p = filepath.Dir(p) {
		_, err := os.Lstat(p)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		missing = append(missing, p)
		if filepath.Dir(p) == p {
			break
		}
	}
	var created []string
	for i := len(missing) - 1; i >= 0; i-- {
		if err := os.Mkdir(missing[i], 0o755); err != nil {
			removeCreated(created)
			return nil, err
		}
		created = append(created, missing[i])
	}
	return created, nil
}

// removeCreated removes the directories mkdirAllTracked created, if they
// are still empty, innermost first.
func removeCreated(created []string) {
	for i := len(created) - 1; i >= 0; i-- {
		os.Remove(created[i])
	}
}

// writeFileIn writes r to a new file name in root, copying through buf:
// io.Copy would allocate 32 KiB per file (os.File.ReadFrom ignores a
// buffer), which dominated the extraction of many small files.
func writeFileIn(root *os.Root, name string, r io.Reader, buf []byte) (err error) {
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
	_, err = io.CopyBuffer(struct{ io.Writer }{f}, r, buf)
	return err
}

// syncFSFiles is the number of files from which an extraction syncs the
// whole file system once (syncFS, where there is one) instead of each
// file and directory: 100,000 empty files took 7 s of fsyncs here, the
// syncfs 50 ms. Below it, fsyncs of the few files written are cheaper
// than waiting for whatever else the file system holds dirty.
const syncFSFiles = 1000

// syncConcurrency is how many fsyncs run at once. The file system batches
// concurrent fsyncs into one journal commit: 100,000 one by one took 16 s.
const syncConcurrency = 32

// syncAll fsyncs every file of files and every directory of dirs under
// stage, in parallel: only their completion, before the rename that
// publishes them, matters to durability, not their order. Each worker
// takes one directory at a time and opens its files by name in it.
func syncAll(ctx context.Context, stage *os.Root, files []File, dirs map[string]struct{}) error {
	byDir := map[string][]string{}
	for _, f := range files {
		d := path.Dir(f.Path)
		byDir[d] = append(byDir[d], path.Base(f.Path))
	}
	for d := range dirs {
		if _, ok := byDir[d]; !ok {
			byDir[d] = nil
		}
	}
	work := make(chan string)
	errs := make(chan error, syncConcurrency)
	var wg sync.WaitGroup
	for range min(syncConcurrency, len(byDir)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d := range work {
				if err := syncDirAndFiles(stage, d, byDir[d]); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var err error
send:
	for d := range byDir {
		select {
		case work <- d:
		case err = <-errs:
			break send
		case <-ctx.Done():
			err = ctx.Err()
			break send
		}
	}
	close(work)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	return err
}

// syncDirAndFiles fsyncs the files names in directory d, then d itself.
func syncDirAndFiles(stage *os.Root, d string, names []string) error {
	dr, err := stage.OpenRoot(filepath.FromSlash(d))
	if err != nil {
		return fmt.Errorf("sync %q: %w", d, err)
	}
	defer dr.Close()
	for _, n := range names {
		if err := syncFile(dr, n); err != nil {
			return fmt.Errorf("sync %q: %w", path.Join(d, n), err)
		}
	}
	if err := syncDir(dr, "."); err != nil {
		return fmt.Errorf("sync %q: %w", d, err)
	}
	return nil
}

// syncFile fsyncs a file, opened without following a final symbolic link.
func syncFile(root *os.Root, name string) error {
	f, err := root.OpenFile(filepath.FromSlash(name), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer f.Close()
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
