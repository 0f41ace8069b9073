package filestore

// SetBeforeRenameHook makes every write of s call f between its condition
// check and its rename, under the directory lock.
func SetBeforeRenameHook(s *Store, f func()) { s.beforeRename = f }
