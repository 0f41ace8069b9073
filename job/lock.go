package job

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrDirLocked is wrapped by the error of Start and Run when another
// job, in this process or another, holds Config.Dir. Nothing was touched.
var ErrDirLocked = errors.New("job: Config.Dir in use by another job")

// lockFile is the lock file the runtime keeps in Config.Dir.
const lockFile = ".tidemark-job.lock"

// lockDir takes an exclusive flock(2) on dir/lockFile without waiting,
// creating dir if need be. Each call opens the file anew, so a second
// lock in the same process conflicts too. The kernel releases it when
// the process dies, kill -9 included; a lock file left behind locks
// nothing. It writes this process's pid for the next one's refusal.
func lockDir(dir string) (release func(), err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("job: lock %s: %w", dir, err)
	}
	path := filepath.Join(dir, lockFile)
	// No O_TRUNC: the pid in it is the holder's until we hold the lock.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("job: lock %s: %w", dir, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			holder := "pid unknown"
			if b, rerr := os.ReadFile(path); rerr == nil {
				if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil && pid > 0 {
					holder = "pid " + strconv.Itoa(pid)
				}
			}
			return nil, fmt.Errorf("%w: %s is held by %s (%s): stop that job first, or give this one its own Dir",
				ErrDirLocked, dir, holder, path)
		}
		return nil, fmt.Errorf("job: lock %s: %w", path, err)
	}
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("job: lock %s: %w", path, err)
	}
	return func() { _ = f.Close() }, nil
}
