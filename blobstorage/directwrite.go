package blobstorage

import (
	"errors"
	"io"
	"os"
	"sync"
	"syscall"
	"unsafe"

	"github.com/tidemark-io/tidemark/internal/localfs"
)

// Restore writes each file it downloads with direct I/O (O_DIRECT) where
// the OS and the filesystem allow it: the bytes go from the download
// buffer to the disk without being copied into the page cache. A restore
// on two cores is CPU-bound, and after the SHA-256 it cannot skip, the
// copy into freshly allocated cache pages was its largest cost: with
// direct writes the client's CPU per restored GiB fell from about 2.0 s
// to 1.2–1.4 s, where mc, which verifies nothing, takes 1.1–1.3 s
// (alternating runs of 256 × 4 MiB on the peer benchmark's MinIO; SHA-256
// is now more than half of what is left). The price: the disk's write
// time is inside the restore instead of after it, and the files are cold
// in the page cache (the job reads from disk what it reads).
// Options.BufferedRestore turns it off, for a disk slower than the store.
//
// Direct writes must start at aligned memory and cover whole blocks, so a
// file is written through an aligned buffer of directBufSize, and its last
// partial block is written buffered (O_DIRECT is cleared for it). Where a
// filesystem refuses O_DIRECT (tmpfs before Linux 6.6, some FUSE and
// overlay setups), at open or at a write, the file is written buffered as
// before. Durability is unchanged: files are not fsynced one by one
// (unsynced.go), and the directory fsyncs and the boot marker are the
// same.

const (
	// directAlign is the alignment of a direct write's memory, offset and
	// length: the largest logical block size in common use.
	directAlign = 4096
	// directBufSize is the buffer a direct write goes through: a 4 MiB
	// file (a typical table) is one write. Options.Concurrency of them
	// are held while a restore runs (32 MiB by default). Measured on 256
	// × 4 MiB files: 4 MiB took 10 % less CPU than 1 MiB, 1 MiB 15 % less
	// than 256 KiB.
	directBufSize = 4 << 20
)

// directBufs holds aligned buffers of directBufSize between files.
var directBufs = sync.Pool{New: func() any {
	raw := make([]byte, directBufSize+directAlign)
	off := (directAlign - int(uintptr(unsafe.Pointer(&raw[0]))%directAlign)) % directAlign
	b := raw[off : off+directBufSize : off+directBufSize]
	return &b
}}

// createRestored creates dst, which must not exist, for a restored file's
// bytes: with O_DIRECT if direct and openDirect supports it. The writer
// it returns is the file or, for a direct one, a directFile wrapping it;
// the File is for Sync and Close. Direct I/O is for the OS's file system
// only: another FS (the simulation's disk) gets plain writes.
func createRestored(fsys localfs.FS, dst string, direct bool) (io.Writer, localfs.File, error) {
	if !localfs.IsOS(fsys) {
		fh, err := fsys.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return nil, nil, err
		}
		return fh, fh, nil
	}
	if direct {
		if fh, err := openDirect(dst); err == nil {
			return &directFile{f: fh, direct: true}, fh, nil
		} else if !errors.Is(err, errNoDirectIO) {
			return nil, nil, err
		}
	}
	fh, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, nil, err
	}
	return fh, fh, nil
}

// errNoDirectIO says that direct I/O is not available for a file.
var errNoDirectIO = errors.New("direct I/O not supported")

// directFile writes a file opened with O_DIRECT. Its ReadFrom, which
// io.Copy uses, fills an aligned buffer and writes it in whole blocks.
// It is for one goroutine.
type directFile struct {
	f      *os.File
	direct bool // O_DIRECT is still set on f
}

// ReadFrom writes everything r yields to the file, through an aligned
// buffer, and returns the bytes read.
func (d *directFile) ReadFrom(r io.Reader) (int64, error) {
	bp := directBufs.Get().(*[]byte)
	defer directBufs.Put(bp)
	buf := *bp
	var n int64
	for {
		m, err := io.ReadFull(r, buf)
		if m > 0 {
			if werr := d.write(buf[:m]); werr != nil {
				return n, werr
			}
			n += int64(m)
		}
		switch {
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			return n, nil
		case err != nil:
			return n, err
		}
	}
}

// Write writes p buffered: only ReadFrom's aligned buffer can go direct.
func (d *directFile) Write(p []byte) (int, error) {
	if err := d.buffered(); err != nil {
		return 0, err
	}
	return d.f.Write(p)
}

// write writes p, which starts at directBufs memory, at the file's end:
// its whole blocks directly while the file is direct, the rest buffered.
func (d *directFile) write(p []byte) error {
	if d.direct {
		whole := len(p) &^ (directAlign - 1)
		if whole > 0 {
			_, err := d.f.Write(p[:whole])
			if !errors.Is(err, syscall.EINVAL) {
				if err != nil {
					return err
				}
				p = p[whole:]
			}
			// EINVAL: the filesystem takes O_DIRECT at open but not
			// these writes (an alignment it wants larger, say). A failed
			// write wrote nothing: write p buffered.
		}
	}
	if len(p) == 0 {
		return nil
	}
	if err := d.buffered(); err != nil {
		return err
	}
	_, err := d.f.Write(p)
	return err
}

// buffered clears O_DIRECT on the file, for a last partial block or after
// the filesystem refused a direct write.
func (d *directFile) buffered() error {
	if !d.direct {
		return nil
	}
	if err := clearDirect(d.f); err != nil {
		return err
	}
	d.direct = false
	return nil
}
