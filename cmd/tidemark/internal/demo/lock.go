package demo

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// LockFile is the name of the lock file LockDir keeps in a directory.
const LockFile = ".tidemark.lock"

// ErrDirLocked is wrapped by LockDir's error when another process (or
// another LockDir of this one) holds the directory's lock.
var ErrDirLocked = errors.New("demo: directory in use")

// DirLockedError is LockDir's refusal: Dir is locked by the process PID
// (0 when the lock file does not say).
type DirLockedError struct {
	Dir string
	PID int
}

func (e *DirLockedError) Error() string {
	pid := "pid unknown"
	if e.PID > 0 {
		pid = "pid " + strconv.Itoa(e.PID)
	}
	return fmt.Sprintf("another process is using %s (%s)", e.Dir, pid)
}

func (e *DirLockedError) Unwrap() error { return ErrDirLocked }

// LockDir takes an exclusive lock on dir (creating it if need be), so
// that two runs of the demo never share their local files: flock(2) on
// dir/LockFile, without waiting. It refuses, with a *DirLockedError, a
// directory another holder has locked, having changed nothing in it;
// otherwise it writes this process's pid into the lock file (for the
// refusal of the next one) and returns the function that releases the
// lock. The kernel releases it too when the process dies, however it
// dies (kill -9 included): a lock file left behind locks nothing.
//
// Run, RunWorkers and ServeWorker do not lock their Dir: their caller
// (the CLI) does, before it opens anything there.
func LockDir(dir string) (release func(), err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("demo: lock %s: %w", dir, err)
	}
	path := filepath.Join(dir, LockFile)
	// No O_TRUNC: the pid in it is the holder's until this one holds it.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("demo: lock %s: %w", dir, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			b, _ := os.ReadFile(path)
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			return nil, &DirLockedError{Dir: dir, PID: pid}
		}
		return nil, fmt.Errorf("demo: lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("demo: lock %s: %w", path, err)
	}
	if _, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("demo: lock %s: %w", path, err)
	}
	return func() { _ = f.Close() }, nil
}
