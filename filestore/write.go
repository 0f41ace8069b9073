package filestore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tidemark-io/tidemark/blobstore"
)

// Put stores the contents of r under key, replacing any object there. See
// docs/s3.md ("Writes and durability") for the write protocol.
func (s *Store) Put(ctx context.Context, key string, r io.Reader) error {
	if _, err := s.write(ctx, key, r, condition{}); err != nil {
		return fmt.Errorf("filestore: put %q: %w", key, err)
	}
	return nil
}

// PutIfAbsent stores r under key only if no object is there, atomically
// against writers in this and other processes, and returns the new ETag.
// If the key exists it fails with [blobstore.ErrPreconditionFailed].
func (s *Store) PutIfAbsent(ctx context.Context, key string, r io.Reader) (string, error) {
	etag, err := s.write(ctx, key, r, condition{ifAbsent: true})
	if err != nil {
		return "", fmt.Errorf("filestore: put if absent %q: %w", key, err)
	}
	return etag, nil
}

// PutIfMatch replaces the object at key only if its ETag is etag,
// atomically against writers in this and other processes, and returns the
// new ETag. If the object is missing or its ETag differs it fails with
// [blobstore.ErrPreconditionFailed].
func (s *Store) PutIfMatch(ctx context.Context, key, etag string, r io.Reader) (string, error) {
	newETag, err := s.write(ctx, key, r, condition{ifMatch: true, etag: etag})
	if err != nil {
		return "", fmt.Errorf("filestore: put if match %q: %w", key, err)
	}
	return newETag, nil
}

// condition is what a conditional write requires of the current object.
type condition struct {
	ifAbsent bool
	ifMatch  bool
	etag     string
}

func (c condition) any() bool { return c.ifAbsent || c.ifMatch }

// check compares the current object (fi, or statErr if there is none)
// with the condition.
func (c condition) check(fi fs.FileInfo, statErr error) error {
	if statErr != nil && !isMissing(statErr) {
		return statErr
	}
	exists := statErr == nil
	switch {
	case c.ifAbsent && exists && fi.IsDir():
		return ErrKeyConflict
	case c.ifAbsent && exists:
		return blobstore.ErrPreconditionFailed
	case c.ifMatch && (!exists || !fi.Mode().IsRegular() || etagOf(fi) != c.etag):
		return blobstore.ErrPreconditionFailed
	}
	return nil
}

// maxDirRetries bounds how often a write starts over because a concurrent
// Delete removed the (empty) directory it was about to write into.
const maxDirRetries = 16

func (s *Store) write(ctx context.Context, key string, r io.Reader, cond condition) (etag string, err error) {
	if err := blobstore.ValidateKey(key); err != nil {
		return "", err
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	root, err := s.openRoot(true)
	if err != nil {
		return "", err
	}
	defer root.Close()
	comps := keyComponents(key)
	dirComps, base := comps[:len(comps)-1], comps[len(comps)-1]

	if cond.any() {
		// Fail fast, before reading the body, when the condition already
		// does not hold. This is only an optimisation: the check that
		// counts is made again under the lock.
		fi, err := root.Stat(key)
		if err := cond.check(fi, err); err != nil {
			return "", err
		}
	}

	// Create the temporary file in the key's directory, so that the
	// rename stays within one directory (and one filesystem). A
	// concurrent Delete may remove a directory that is empty for a moment
	// between our mkdir and our create; then start over.
	var (
		dir     *os.Root
		tmp     *os.File
		tmpName string
	)
	for attempt := 0; ; attempt++ {
		dir, err = mkdirs(root, dirComps)
		if err == nil {
			tmp, tmpName, err = createTemp(dir)
			if err != nil {
				dir.Close()
			}
		}
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) || attempt == maxDirRetries {
			return "", err
		}
	}
	committed := false
	defer func() {
		tmp.Close()
		if !committed {
			// Nothing may be left behind by a failed write: neither the
			// temporary file nor directories made for it.
			_ = dir.Remove(tmpName)
			pruneEmptyDirs(root, dirComps)
		}
		dir.Close()
	}()

	if err := s.copy(ctx, tmp, r); err != nil {
		return "", err
	}
	// The commit time, with nanosecond resolution, becomes the object's
	// ModTime and part of its ETag (docs/s3.md, "ETags").
	now := time.Now()
	if err := dir.Chtimes(tmpName, now, now); err != nil {
		return "", err
	}
	// The data must be durable before the rename makes it visible:
	// otherwise a crash could leave the key naming an empty or torn file.
	if err := tmp.Sync(); err != nil {
		return "", err
	}

	lock, err := s.lockDir(ctx, dir, dirComps)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if cond.any() {
		fi, err := dir.Stat(base)
		if err := cond.check(fi, err); err != nil {
			return "", err
		}
	}
	if s.beforeRename != nil {
		s.beforeRename()
	}
	if err := dir.Rename(tmpName, base); err != nil {
		if isDirConflict(err) {
			return "", ErrKeyConflict
		}
		return "", err
	}
	committed = true
	// fstat after the rename: rename changes the inode's ctime, which is
	// part of the ETag.
	fi, err := tmp.Stat()
	if err != nil {
		return "", err
	}
	etag = etagOf(fi)
	if cond.any() {
		// A conditional write fsyncs the directory before it unlocks, so
		// that no competing conditional writer decides on a state that a
		// crash could still take back.
		if err := lock.Sync(); err != nil {
			return "", err
		}
		return etag, lock.Close()
	}
	// An unconditional Put needs only to be durable when it returns;
	// fsync outside the lock so that writers to one directory do not
	// queue behind each other's fsyncs.
	if err := lock.unlock(); err != nil {
		return "", err
	}
	return etag, lock.Sync()
}

// copy drains r into w through a pooled buffer, checking ctx after every
// read: a reader that blocks cannot be interrupted, but once it returns a
// cancelled Put fails instead of committing.
func (s *Store) copy(ctx context.Context, w io.Writer, r io.Reader) error {
	bp := s.bufs.Get().(*[]byte)
	defer s.bufs.Put(bp)
	buf := *bp
	for {
		n, rerr := r.Read(buf)
		if err := ctx.Err(); err != nil {
			return err
		}
		if n > 0 {
			if _, err := w.Write(buf[:n]); err != nil {
				return err
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

// Temporary files are named tempPrefix + random hex + tempSuffix. The
// suffix, DEL (0x7f), is a control character, which no key may contain, so
// a temporary file can never collide with a key nor be listed as one; the
// readable prefix tells a person what a leftover file (after a crash) is.
const (
	tempPrefix = ".tidemark-tmp-"
	tempSuffix = "\x7f"
)

func createTemp(dir *os.Root) (*os.File, string, error) {
	for {
		name := fmt.Sprintf("%s%016x%s", tempPrefix, rand.Uint64(), tempSuffix)
		f, err := dir.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return f, name, err
	}
}

// mkdirs opens the directory comps (relative to root), creating what is
// missing. Each directory it creates is fsynced into its parent before
// anything is created inside it, so a durable file never hangs off a
// directory entry a crash could lose.
func mkdirs(root *os.Root, comps []string) (*os.Root, error) {
	cur, err := root.OpenRoot(".")
	if err != nil {
		return nil, err
	}
	for _, c := range comps {
		next, err := cur.OpenRoot(c)
		if errors.Is(err, fs.ErrNotExist) {
			err = cur.Mkdir(c, 0o777)
			if err == nil {
				err = syncRoot(cur)
			} else if errors.Is(err, fs.ErrExist) {
				err = nil // made by a concurrent writer
			}
			if err == nil {
				next, err = cur.OpenRoot(c)
			}
		}
		if err != nil {
			if fi, serr := cur.Lstat(c); serr == nil && fi.Mode().IsRegular() {
				err = ErrKeyConflict // c is a key; it cannot also hold keys
			}
			cur.Close()
			return nil, err
		}
		cur.Close()
		cur = next
	}
	return cur, nil
}

func syncRoot(r *os.Root) error {
	d, err := r.Open(".")
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// isDirConflict reports whether a rename failed because the target is a
// directory (the key holds other keys).
func isDirConflict(err error) bool {
	return errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST)
}

// dirLock is flock(LOCK_EX) held on an open directory. The lock belongs to
// the open file description, so it excludes other goroutines of this
// process (each opens its own) as well as other processes; closing
// releases it, also when the process dies.
type dirLock struct {
	*os.File
}

// Waiting for a lock polls with a non-blocking flock, from lockPollMin
// doubling to lockPollMax: a blocking flock cannot be interrupted, so a
// writer stuck behind a stopped process would ignore its context (and
// the user's Ctrl-C) for as long as that process stays stopped.
const (
	lockPollMin = 50 * time.Microsecond
	lockPollMax = 20 * time.Millisecond
)

// lockWaitNotice is how long a write waits for a lock before it says so:
// a healthy writer holds one for milliseconds.
const lockWaitNotice = 200 * time.Millisecond

// lockDir takes the lock of dir (the directory comps under the root),
// waiting at most the Store's lock timeout and never past ctx.
func (s *Store) lockDir(ctx context.Context, dir *os.Root, comps []string) (*dirLock, error) {
	f, err := dir.Open(".")
	if err != nil {
		return nil, err
	}
	var deadline time.Time
	if s.lockTimeout > 0 {
		deadline = time.Now().Add(s.lockTimeout)
	}
	var timer *time.Timer
	start, noticed := time.Now(), false
	for wait := lockPollMin; ; wait = min(2*wait, lockPollMax) {
		err := flock(f, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			if err := ctx.Err(); err != nil {
				f.Close() // closing releases the lock
				return nil, err
			}
			return &dirLock{f}, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock directory: %w", err)
		}
		if !deadline.IsZero() && time.Now().After(deadline) {
			f.Close()
			p := filepath.Join(append([]string{s.dir}, comps...)...)
			return nil, fmt.Errorf("%w: the lock (flock) on %s has been held for over %v; "+
				"another process holds it and is not finishing its write: stopped (SIGSTOP, docker pause, a debugger) or hung? "+
				"(fuser -v %s shows who has it open)", ErrLocked, p, s.lockTimeout, p)
		}
		if !noticed && s.logger != nil && time.Since(start) >= lockWaitNotice {
			noticed = true
			p := filepath.Join(append([]string{s.dir}, comps...)...)
			limit := "until interrupted"
			if s.lockTimeout > 0 {
				limit = "for up to " + s.lockTimeout.String()
			}
			s.logger.Warn("filestore: waiting for the lock (flock) on "+p+", held by another process; "+
				"stopped or hung? (fuser -v "+p+" shows who has it open)", "dir", p, "waits", limit)
		}
		if timer == nil {
			timer = time.NewTimer(wait)
			defer timer.Stop()
		} else {
			timer.Reset(wait)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for the lock on %s: %w", filepath.Join(append([]string{s.dir}, comps...)...), ctx.Err())
		case <-timer.C:
		}
	}
}

func (l *dirLock) unlock() error { return flock(l.File, unix.LOCK_UN) }

func flock(f *os.File, how int) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) {
		for {
			ferr = unix.Flock(int(fd), how)
			if ferr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	return ferr
}

// Delete removes the object at key; a missing key is not an error. It then
// removes the directories the deletion left empty, up to the root, so that
// deleted trees do not slow List down.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := s.delete(ctx, key, nil); err != nil {
		return fmt.Errorf("filestore: delete %q: %w", key, err)
	}
	return nil
}

var _ blobstore.ConditionalDeleter = (*Store)(nil)

// DeleteIfMatch removes the object at key only if its ETag is etag, under
// the same directory lock as conditional writes, so that no writer can
// replace the object between the check and the unlink. A missing object
// is [blobstore.ErrNotFound]; another ETag,
// [blobstore.ErrPreconditionFailed].
func (s *Store) DeleteIfMatch(ctx context.Context, key, etag string) error {
	if err := s.delete(ctx, key, &etag); err != nil {
		return fmt.Errorf("filestore: delete if match %q: %w", key, err)
	}
	return nil
}

// delete unlinks key; with ifMatch, only if the object's ETag is
// *ifMatch (and a missing object is then ErrNotFound).
func (s *Store) delete(ctx context.Context, key string, ifMatch *string) error {
	missing := func() error {
		if ifMatch != nil {
			return blobstore.ErrNotFound
		}
		return nil
	}
	if err := blobstore.ValidateKey(key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	root, err := s.openRoot(false)
	if err != nil {
		if isMissing(err) {
			return missing()
		}
		return err
	}
	defer root.Close()
	comps := keyComponents(key)
	dirComps, base := comps[:len(comps)-1], comps[len(comps)-1]
	dir, err := openDir(root, path.Join(dirComps...))
	if err != nil {
		if isMissing(err) {
			return missing()
		}
		return err
	}
	defer dir.Close()

	// Unlink under the directory lock, so that a conditional write cannot
	// recreate the object between its check and its rename.
	lock, err := s.lockDir(ctx, dir, dirComps)
	if err != nil {
		return err
	}
	defer lock.Close()
	fi, err := dir.Lstat(base)
	if err != nil {
		if isMissing(err) {
			return missing()
		}
		return err
	}
	if fi.IsDir() {
		// A directory of other keys; there is no object named key.
		return missing()
	}
	if ifMatch != nil && etagOf(fi) != *ifMatch {
		return blobstore.ErrPreconditionFailed
	}
	if err := dir.Remove(base); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := lock.unlock(); err != nil {
		return err
	}
	if err := lock.Sync(); err != nil {
		return err
	}
	lock.Close()
	pruneEmptyDirs(root, dirComps)
	return nil
}

// openDir opens the directory p inside root. Something that is not a
// directory is reported as ENOTDIR.
func openDir(root *os.Root, p string) (*os.Root, error) {
	if p == "" {
		p = "."
	}
	d, err := root.OpenRoot(p)
	if err != nil {
		if fi, serr := root.Stat(p); serr == nil && !fi.IsDir() {
			return nil, syscall.ENOTDIR
		}
		return nil, err
	}
	return d, nil
}

// pruneEmptyDirs removes the directories comps, deepest first, while they
// are empty. It uses rmdir, never unlink, so it cannot remove a file that a
// concurrent writer has put where a directory was; a writer that loses its
// directory to the race starts over (see write). Errors just stop it: the
// empty directories it leaves are harmless.
func pruneEmptyDirs(root *os.Root, comps []string) {
	for i := len(comps); i > 0; i-- {
		parent, err := openDir(root, path.Join(comps[:i-1]...))
		if err != nil {
			return
		}
		err = rmdirAt(parent, comps[i-1])
		parent.Close()
		if err != nil {
			return
		}
	}
}

func rmdirAt(parent *os.Root, name string) error {
	d, err := parent.Open(".")
	if err != nil {
		return err
	}
	defer d.Close()
	rc, err := d.SyscallConn()
	if err != nil {
		return err
	}
	var uerr error
	if err := rc.Control(func(fd uintptr) {
		uerr = unix.Unlinkat(int(fd), name, unix.AT_REMOVEDIR)
	}); err != nil {
		return err
	}
	return uerr
}
