package sim

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/tidemark-io/tidemark/internal/localfs"
)

// Disk is a host's simulated local disk: the directory a writer keeps its
// state directories in, shared by the processes that run on the host one
// after another. It keeps real files (Save reads them with package os) and
// tracks what of them is durable: a file's content once it is fsynced, a
// directory's entries once the directory is. Writes go through the
// localfs.FS a process gets from Proc.
//
//   - A write fails with ENOSPC (a *fs.PathError as the OS returns it) when
//     the host's capacity would be exceeded, or at random on a flaky disk.
//   - A process crash loses nothing written (the page cache outlives the
//     process); a machine crash loses what was not made durable: at the
//     next boot each directory holds either the entries it had at its last
//     fsync or the ones it had when the machine stopped (the journal may
//     have committed them), and each file written since its last fsync
//     holds its synced content, zeros of its length, or what was written.
//     The boot id changes.
//
// After a crash the dead process's writes fail (EIO): it is gone, even if
// its goroutines have not noticed yet.
type Disk struct {
	Name     string
	Root     string
	Capacity int64   // bytes; 0: unlimited
	Flaky    float64 // probability that a write fails with ENOSPC

	mu      sync.Mutex
	rng     *rand.Rand
	inc     int // the incarnation allowed to write
	boot    int
	crashed bool // a machine crash waits for the next boot
	// metaOnly: the crash being rebuilt kept names and sizes, not data.
	metaOnly bool
	temp     int
	// Inodes are the disk's own numbers, given at creation in the run's
	// order: the OS's are recycled in an order that is not the run's.
	vids    map[uint64]uint64 // the OS's inode number → the disk's
	nextVid uint64
	dirs    map[uint64]map[string]dirent // durable entries of a directory, by inode
	data    map[uint64][]byte            // durable content of a file, by inode
	dirty   map[uint64]bool              // written since its last fsync
	// Owner is the process running on the host, "" when none.
	Owner string
	// Crashes counts machine crashes, ENOSPC the writes refused.
	Crashes, ENOSPC int
}

type dirent struct {
	ino uint64
	dir bool
}

// NewDisk returns the disk of host name, in the real directory root.
func NewDisk(name, root string, seed uint64) *Disk {
	if err := os.MkdirAll(root, 0o755); err != nil {
		panic(err)
	}
	return &Disk{
		Name: name, Root: root, rng: rand.New(rand.NewPCG(seed, 7)), boot: 1,
		dirs: map[uint64]map[string]dirent{}, data: map[uint64][]byte{}, dirty: map[uint64]bool{},
		vids: map[uint64]uint64{},
	}
}

// Boot starts process owner on the host: after a machine crash, the disk
// is first what survived it. It returns the process's view of the disk.
func (d *Disk) Boot(owner string) (localfs.FS, string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	what := "process restart"
	if d.crashed {
		d.crashed = false
		kept, zeroed, lost := d.reboot()
		d.boot++
		what = fmt.Sprintf("after a machine crash (%d files as written, %d zeroed or cut, %d lost or emptied)", kept, zeroed, lost)
	}
	if d.boot == 1 && d.inc == 0 {
		what = "a new host"
	}
	d.inc++
	d.Owner = owner
	return &diskFS{d: d, inc: d.inc}, what
}

// Crash stops the host's process: its writes fail from now on. With
// machine, the machine crashed too: the next Boot loses what was not
// durable.
func (d *Disk) Crash(machine bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.inc++
	d.Owner = ""
	if machine {
		d.crashed = true
		d.Crashes++
	}
}

// Exit says the host's process ended by itself: the host is free.
func (d *Disk) Exit(owner string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.Owner == owner {
		d.Owner = ""
		d.inc++
	}
}

// Free reports whether no process runs on the host.
func (d *Disk) Free() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.Owner == ""
}

func osInode(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	panic("sim: no inode numbers on this platform")
}

// inode returns the disk's number of the file or directory fi describes.
func (d *Disk) inode(fi fs.FileInfo) uint64 {
	ino := osInode(fi)
	v, ok := d.vids[ino]
	if !ok {
		d.nextVid++
		v = d.nextVid
		d.vids[ino] = v
	}
	return v
}

// created gives the file or directory at p, just created, a new number.
func (d *Disk) created(p string) uint64 {
	fi, err := os.Lstat(p)
	if err != nil {
		return 0
	}
	delete(d.vids, osInode(fi))
	return d.inode(fi)
}

// reboot rebuilds Root as a machine crash left it.
func (d *Disk) reboot() (kept, zeroed, lost int) {
	// Where each live inode is, for the content of unsynced files.
	live := map[uint64]string{}
	_ = filepath.WalkDir(d.Root, func(p string, e fs.DirEntry, err error) error {
		if err == nil {
			if fi, err := e.Info(); err == nil {
				live[d.inode(fi)] = p
			}
		}
		return nil
	})
	rootFi, err := os.Lstat(d.Root)
	if err != nil {
		panic(err)
	}
	stage := d.Root + ".reboot"
	_ = os.RemoveAll(stage)
	if err := os.Mkdir(stage, 0o755); err != nil {
		panic(err)
	}
	made := map[uint64]string{} // file inode → its first path in stage
	// Half the crashes are a journal that committed every name and size
	// but no data written since the last fsync (zeros, as XFS shows it);
	// in the others each directory and file comes out its own way.
	d.metaOnly = d.rng.IntN(2) == 0
	var build func(ino uint64, src, dst string)
	build = func(ino uint64, src, dst string) {
		// The entries that survive: as of the last fsync, or as at the
		// crash (the journal committed them).
		ents := d.dirs[ino]
		if src != "" && (d.metaOnly || d.rng.IntN(2) == 0) {
			ents = map[string]dirent{}
			list, _ := os.ReadDir(src)
			for _, e := range list {
				if fi, err := e.Info(); err == nil && (fi.Mode().IsRegular() || fi.IsDir()) {
					ents[e.Name()] = dirent{ino: d.inode(fi), dir: fi.IsDir()}
				}
			}
		}
		names := make([]string, 0, len(ents))
		for n := range ents {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			e, p := ents[n], filepath.Join(dst, n)
			if e.dir {
				if err := os.Mkdir(p, 0o755); err != nil {
					panic(err)
				}
				build(e.ino, liveDir(live, e.ino), p)
				continue
			}
			if first, ok := made[e.ino]; ok {
				if err := os.Link(first, p); err != nil {
					panic(err)
				}
				continue
			}
			made[e.ino] = p
			b := d.survivor(e.ino, live[e.ino])
			now, _ := os.ReadFile(live[e.ino])
			switch {
			case string(b) == string(now):
				kept++
			case len(b) == 0:
				lost++
			default:
				zeroed++
			}
			if err := os.WriteFile(p, b, 0o644); err != nil {
				panic(err)
			}
		}
	}
	build(d.inode(rootFi), d.Root, stage)
	if err := os.RemoveAll(d.Root); err != nil {
		panic(err)
	}
	if err := os.Rename(stage, d.Root); err != nil {
		panic(err)
	}
	// What is on the disk after the reboot is durable.
	d.dirs, d.data, d.dirty = map[uint64]map[string]dirent{}, map[uint64][]byte{}, map[uint64]bool{}
	d.vids = map[uint64]uint64{}
	_ = filepath.WalkDir(d.Root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if e.IsDir() {
			d.snapshotDir(p)
		} else if fi, err := e.Info(); err == nil {
			b, _ := os.ReadFile(p)
			d.data[d.inode(fi)] = b
		}
		return nil
	})
	return kept, zeroed, lost
}

func liveDir(live map[uint64]string, ino uint64) string {
	p, ok := live[ino]
	if !ok {
		return ""
	}
	if fi, err := os.Lstat(p); err != nil || !fi.IsDir() {
		return ""
	}
	return p
}

// survivor is what a machine crash leaves of file ino (at path src while
// the machine ran, or "" if no longer there).
func (d *Disk) survivor(ino uint64, src string) []byte {
	synced, ok := d.data[ino]
	if ok && !d.dirty[ino] {
		return synced
	}
	var now []byte
	if src != "" {
		now, _ = os.ReadFile(src)
	}
	if d.metaOnly {
		return make([]byte, len(now))
	}
	switch d.rng.IntN(3) {
	case 0:
		return synced // what the last fsync made durable, or nothing
	case 1:
		return make([]byte, len(now)) // the length was journaled, not the data
	default:
		return now // written back before the crash
	}
}

// snapshotDir records the entries of directory p as durable.
func (d *Disk) snapshotDir(p string) error {
	fi, err := os.Lstat(p)
	if err != nil {
		return err
	}
	list, err := os.ReadDir(p)
	if err != nil {
		return err
	}
	ents := map[string]dirent{}
	for _, e := range list {
		if efi, err := e.Info(); err == nil && (efi.Mode().IsRegular() || efi.IsDir()) {
			ents[e.Name()] = dirent{ino: d.inode(efi), dir: efi.IsDir()}
		}
	}
	d.dirs[d.inode(fi)] = ents
	return nil
}

// used is the bytes the files under Root take (each inode once).
func (d *Disk) used() int64 {
	seen := map[uint64]bool{}
	var n int64
	_ = filepath.WalkDir(d.Root, func(p string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			if fi, err := e.Info(); err == nil && !seen[osInode(fi)] {
				seen[osInode(fi)] = true
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// diskFS is one process's view of a Disk.
type diskFS struct {
	d   *Disk
	inc int
}

var _ localfs.FS = (*diskFS)(nil)

// errGone is what the calls of a process that crashed get.
var errGone = syscall.EIO

// alive locks the disk if the process still runs on it.
func (f *diskFS) alive(op, path string) error {
	f.d.mu.Lock()
	if f.d.inc != f.inc {
		f.d.mu.Unlock()
		return &fs.PathError{Op: op, Path: path, Err: errGone}
	}
	return nil
}

func (f *diskFS) do(op, path string, fn func() error) error {
	if err := f.alive(op, path); err != nil {
		return f.d.rel(err)
	}
	defer f.d.mu.Unlock()
	return f.d.rel(fn())
}

// rel rewrites the paths in err as host:/path, so that a run's trace
// does not depend on where its temporary directory is.
func (d *Disk) rel(err error) error {
	p := func(s string) string {
		if r, e := filepath.Rel(d.Root, s); e == nil && !strings.HasPrefix(r, "..") {
			return d.Name + ":/" + filepath.ToSlash(r)
		}
		return s
	}
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		pe.Path = p(pe.Path)
	case errors.As(err, &le):
		le.Old, le.New = p(le.Old), p(le.New)
	}
	return err
}

func (f *diskFS) OpenFile(name string, flag int, perm fs.FileMode) (localfs.File, error) {
	var h *diskFile
	err := f.do("open", name, func() error {
		_, serr := os.Lstat(name)
		fh, err := os.OpenFile(name, flag, perm)
		if err != nil {
			return err
		}
		fi, err := fh.Stat()
		if err != nil {
			fh.Close()
			return err
		}
		h = &diskFile{fs: f, f: fh, ino: f.d.inode(fi)}
		if serr != nil {
			h.ino = f.d.created(name) // its OS inode number may be a removed file's
			f.d.dirty[h.ino] = true
		} else if flag&(os.O_WRONLY|os.O_RDWR) != 0 && flag&os.O_TRUNC != 0 {
			f.d.dirty[h.ino] = true
		}
		return nil
	})
	if err != nil {
		return nil, err // do made its paths relative
	}
	return h, nil
}

func (f *diskFS) Open(name string) (localfs.File, error) { return f.OpenFile(name, os.O_RDONLY, 0) }

// tempName returns a name from pattern as os.CreateTemp would, but
// deterministic: a run's trace must not depend on it.
func (f *diskFS) tempName(dir, pattern string) string {
	f.d.temp++
	r := fmt.Sprintf("%d", f.d.temp)
	if i := strings.LastIndex(pattern, "*"); i >= 0 {
		return filepath.Join(dir, pattern[:i]+r+pattern[i+1:])
	}
	return filepath.Join(dir, pattern+r)
}

func (f *diskFS) CreateTemp(dir, pattern string) (localfs.File, error) {
	if err := f.alive("createtemp", dir); err != nil {
		return nil, f.d.rel(err)
	}
	name := f.tempName(dir, pattern)
	f.d.mu.Unlock()
	return f.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
}

func (f *diskFS) MkdirTemp(dir, pattern string) (string, error) {
	var name string
	err := f.do("mkdirtemp", dir, func() error {
		name = f.tempName(dir, pattern)
		if err := os.Mkdir(name, 0o700); err != nil {
			return err
		}
		f.d.newDirs(name, dir)
		return nil
	})
	return name, err
}

func (f *diskFS) MkdirAll(path string, perm fs.FileMode) error {
	return f.do("mkdir", path, func() error {
		top := filepath.Clean(path)
		for {
			parent := filepath.Dir(top)
			if _, err := os.Lstat(parent); err == nil || parent == top {
				break
			}
			top = parent
		}
		_, existed := os.Lstat(top)
		if err := os.MkdirAll(path, perm); err != nil {
			return err
		}
		if existed != nil {
			f.d.newDirs(path, filepath.Dir(top))
		}
		return nil
	})
}

// newDirs numbers the directories from p up to (not including) stop,
// just created.
func (d *Disk) newDirs(p, stop string) {
	for p = filepath.Clean(p); p != filepath.Clean(stop) && p != filepath.Dir(p); p = filepath.Dir(p) {
		d.created(p)
	}
}

func (f *diskFS) Rename(oldpath, newpath string) error {
	return f.do("rename", oldpath, func() error { return os.Rename(oldpath, newpath) })
}

func (f *diskFS) Remove(name string) error {
	return f.do("remove", name, func() error { return os.Remove(name) })
}

func (f *diskFS) RemoveAll(path string) error {
	return f.do("removeall", path, func() error { return os.RemoveAll(path) })
}

// Link makes a hard link (the world's state directories share immutable
// files as Pebble's checkpoints do).
func (f *diskFS) Link(oldname, newname string) error {
	return f.do("link", newname, func() error { return os.Link(oldname, newname) })
}

// WriteFile is os.WriteFile through the disk: no fsync.
func (f *diskFS) WriteFile(name string, b []byte, perm fs.FileMode) error {
	h, err := f.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	_, err = h.Write(b)
	if cerr := h.Close(); err == nil {
		err = cerr
	}
	return err
}

func (f *diskFS) Lstat(name string) (fs.FileInfo, error) {
	fi, err := os.Lstat(name)
	return fi, f.d.rel(err)
}

func (f *diskFS) ReadFile(name string) ([]byte, error) {
	b, err := os.ReadFile(name)
	return b, f.d.rel(err)
}

func (f *diskFS) ReadDir(name string) ([]fs.DirEntry, error) {
	l, err := os.ReadDir(name)
	return l, f.d.rel(err)
}

func (f *diskFS) SyncDir(dir string) error {
	return f.do("fsync", dir, func() error { return f.d.snapshotDir(dir) })
}

func (f *diskFS) SyncTree(root string) error {
	return f.do("fsync", root, func() error {
		return filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if e.IsDir() {
				return f.d.snapshotDir(p)
			}
			return nil
		})
	})
}

func (f *diskFS) BootID() string {
	f.d.mu.Lock()
	defer f.d.mu.Unlock()
	return fmt.Sprintf("%s-boot-%d", f.d.Name, f.d.boot)
}

// diskFile is a file open on a Disk.
type diskFile struct {
	fs  *diskFS
	f   *os.File
	ino uint64
}

func (h *diskFile) Name() string { return h.f.Name() }
func (h *diskFile) Read(p []byte) (int, error) {
	n, err := h.f.Read(p)
	if err == io.EOF {
		return n, err
	}
	return n, h.fs.d.rel(err)
}
func (h *diskFile) Close() error { return h.f.Close() }

func (h *diskFile) Write(p []byte) (int, error) {
	d := h.fs.d
	if err := h.fs.alive("write", h.f.Name()); err != nil {
		return 0, d.rel(err)
	}
	defer d.mu.Unlock()
	full := d.Capacity > 0 && d.used()+int64(len(p)) > d.Capacity
	if full || (d.Flaky > 0 && d.rng.Float64() < d.Flaky) {
		d.ENOSPC++
		return 0, d.rel(&fs.PathError{Op: "write", Path: h.f.Name(), Err: syscall.ENOSPC})
	}
	d.dirty[h.ino] = true
	n, err := h.f.Write(p)
	return n, d.rel(err)
}

func (h *diskFile) Sync() error {
	d := h.fs.d
	if err := h.fs.alive("sync", h.f.Name()); err != nil {
		return d.rel(err)
	}
	defer d.mu.Unlock()
	b, err := os.ReadFile(h.f.Name())
	if err != nil {
		return d.rel(err)
	}
	d.data[h.ino] = b
	delete(d.dirty, h.ino)
	return nil
}
