package filestore

import "os"

// SetBeforeRenameHook makes every write of s call f between its condition
// check and its rename, under the directory lock.
func SetBeforeRenameHook(s *Store, f func()) { s.beforeRename = f }

// ReadEntriesOfRemoved opens dir as a root, removes it, and reads it as
// a listing would when a delete beside it removed the directory.
func ReadEntriesOfRemoved(dir string) (int, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	if err := os.RemoveAll(dir); err != nil {
		return 0, err
	}
	es, err := readEntries(r, "")
	return len(es), err
}
