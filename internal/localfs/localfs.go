// Package localfs is the seam between Tidemark's writes of local state
// directories (a restore, its boot marker, removing a local copy) and the
// file system: OS, the default, calls package os and internal/fsync
// directly; the deterministic simulation (integration/sim) passes a disk
// that fills up and loses what was not synced when its machine crashes.
//
// Reads of state directories (Save's walk and uploads) stay on package os:
// an FS must write through to files the OS sees (the simulated disk keeps
// real files and tracks what of them is durable).
package localfs

import (
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/tidemark-io/tidemark/internal/fsync"
)

// File is an open file of an FS.
type File interface {
	io.Reader
	io.Writer
	io.Closer
	// Sync makes the file's content durable (not its name: see SyncDir).
	Sync() error
	Name() string
}

// FS is what Tidemark's local writes need of a file system. Errors are as
// package os returns them (*fs.PathError, *os.LinkError wrapping a
// syscall.Errno such as ENOSPC).
type FS interface {
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	Open(name string) (File, error)
	CreateTemp(dir, pattern string) (File, error)
	MkdirTemp(dir, pattern string) (string, error)
	MkdirAll(path string, perm fs.FileMode) error
	Rename(oldpath, newpath string) error
	Remove(name string) error
	RemoveAll(path string) error
	Lstat(name string) (fs.FileInfo, error)
	ReadFile(name string) ([]byte, error)
	ReadDir(name string) ([]fs.DirEntry, error)
	// SyncDir fsyncs directory dir: its entries' creation, removal and
	// renaming become durable.
	SyncDir(dir string) error
	// SyncTree fsyncs every directory under root, root included.
	SyncTree(root string) error
	// BootID names the machine's current boot, or "" where there is none
	// to read: a machine crash changes it.
	BootID() string
}

// OS is the operating system's file system.
type OS struct{}

var _ FS = OS{}

// Default returns fsys, or OS if it is nil.
func Default(fsys FS) FS {
	if fsys == nil {
		return OS{}
	}
	return fsys
}

// IsOS reports whether fsys is the operating system's (so that a caller
// may use what only an *os.File offers, such as direct I/O).
func IsOS(fsys FS) bool {
	_, ok := fsys.(OS)
	return ok
}

func (OS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return f, nil
}

func (OS) Open(name string) (File, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (OS) CreateTemp(dir, pattern string) (File, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (OS) MkdirTemp(dir, pattern string) (string, error) { return os.MkdirTemp(dir, pattern) }
func (OS) MkdirAll(path string, perm fs.FileMode) error  { return os.MkdirAll(path, perm) }
func (OS) Rename(oldpath, newpath string) error          { return os.Rename(oldpath, newpath) }
func (OS) Remove(name string) error                      { return os.Remove(name) }
func (OS) RemoveAll(path string) error                   { return os.RemoveAll(path) }
func (OS) Lstat(name string) (fs.FileInfo, error)        { return os.Lstat(name) }
func (OS) ReadFile(name string) ([]byte, error)          { return os.ReadFile(name) }
func (OS) ReadDir(name string) ([]fs.DirEntry, error)    { return os.ReadDir(name) }
func (OS) SyncDir(dir string) error                      { return fsync.Dir(dir) }
func (OS) SyncTree(root string) error                    { return fsync.Tree(root) }

// bootIDPath is where Linux says which boot this is.
const bootIDPath = "/proc/sys/kernel/random/boot_id"

// BootID returns Linux's boot id, or "" where the OS has none.
func (OS) BootID() string {
	b, err := os.ReadFile(bootIDPath)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
