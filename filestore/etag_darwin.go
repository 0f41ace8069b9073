package filestore

import (
	"fmt"
	"io/fs"
	"syscall"
)

// etagOf derives an ETag from a file's inode, size, modification time and
// status-change time; see docs/s3.md ("ETags") for why this changes
// whenever the content does.
func etagOf(fi fs.FileInfo) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Sprintf("%x-%x", fi.Size(), fi.ModTime().UnixNano())
	}
	return fmt.Sprintf("%x-%x-%x-%x", st.Ino, st.Size, st.Mtimespec.Nano(), st.Ctimespec.Nano())
}
