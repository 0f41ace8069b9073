package archive

import (
	"os"

	"golang.org/x/sys/unix"
)

// syncFS flushes, and waits for, everything dirty on the file system that
// holds d: the data and metadata of every file and directory written
// there. It reports a writeback error of that file system that happened
// after d was opened (Linux ≥ 5.8), as fsync does for one file.
func syncFS(d *os.File) error {
	if err := unix.Syncfs(int(d.Fd())); err != nil {
		return &os.PathError{Op: "syncfs", Path: d.Name(), Err: err}
	}
	return nil
}

const haveSyncFS = true
