package blobstorage

import (
	"errors"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// openDirect creates dst with O_DIRECT, or returns errNoDirectIO where the
// filesystem refuses it (EINVAL).
func openDirect(dst string) (*os.File, error) {
	fh, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_DIRECT, 0o644)
	if errors.Is(err, syscall.EINVAL) {
		// A failed open with O_CREAT may have created the file.
		_ = os.Remove(dst)
		return nil, errNoDirectIO
	}
	return fh, err
}

// clearDirect turns f's O_DIRECT off: its next writes go through the page
// cache.
func clearDirect(f *os.File) error {
	sc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := sc.Control(func(fd uintptr) {
		var fl int
		if fl, ferr = unix.FcntlInt(fd, unix.F_GETFL, 0); ferr == nil {
			_, ferr = unix.FcntlInt(fd, unix.F_SETFL, fl&^unix.O_DIRECT)
		}
	}); err != nil {
		return err
	}
	return ferr
}
