package state

import (
	"errors"
	"io/fs"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// noRecycleFS is the OS filesystem with WAL recycling turned off.
//
// Pebble recycles an obsolete WAL by renaming it and overwriting it from
// the start, so a new WAL is as long as the old one: its tail is stale
// records that the reader skips. A checkpoint copies whole WAL files, and
// WALs are private (uploaded with every checkpoint), so recycling would
// make each checkpoint upload up to MemTableSize of garbage per owner even
// right after a flush. The vfs.FS contract lets ReuseForWrite create a
// new file and delete the old one instead; that is all this does. The cost
// is a file creation per memtable rotation, negligible without per-write
// fsync.
type noRecycleFS struct {
	vfs.FS
}

// ReuseForWrite creates newname afresh and removes oldname.
func (f noRecycleFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	file, err := f.FS.Create(newname, category)
	if err != nil {
		return nil, err
	}
	if err := f.FS.Remove(oldname); err != nil && !errors.Is(err, fs.ErrNotExist) {
		_ = file.Close()
		return nil, err
	}
	return file, nil
}
