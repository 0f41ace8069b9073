package blobstorage

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/internal/localfs"
)

// Restore writes its files without fsyncing them one by one: the per-file
// fsync was a quarter to a half of a restore's wall time (make
// bench-peers), and the bucket stays the source of truth. What makes that
// safe is a marker, <id>.state.boot beside the state directory, written
// durably before the directory is renamed into place and naming the boot
// the files were written in. A process that crashes (kill -9) loses
// nothing that was written: the page cache outlives it, and the next
// process of the same boot reads the files back intact. Only a crash of
// the machine (power, kernel) can lose unsynced data, and it changes the
// boot id: a state directory whose marker names another boot is verified
// against its record's digests before it is trusted again, and restored
// afresh when it does not match. Where there is no boot id to read (not
// Linux), every file is fsynced as before.

// bootMarker returns the path of the marker of state directory dst.
func bootMarker(dst string) string { return dst + ".boot" }

// writeBootMarker durably records that the files under dst were written,
// unsynced, during boot id.
func writeBootMarker(fsys localfs.FS, dst, id string) error {
	dir, name := filepath.Split(bootMarker(dst))
	f, err := fsys.CreateTemp(dir, checkpoint.TempPattern(name))
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = io.Copy(f, bytes.NewReader([]byte(id+"\n")))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(tmp, bootMarker(dst))
	}
	if err != nil {
		_ = fsys.Remove(tmp)
	}
	return err
}

// unsyncedSinceReboot reports whether the files under dst were written
// unsynced during another boot than this one (or the marker cannot be
// read), so that they may have lost data.
func unsyncedSinceReboot(fsys localfs.FS, dst string) bool {
	b, err := fsys.ReadFile(bootMarker(dst))
	if errors.Is(err, fs.ErrNotExist) {
		return false // fsynced when written (by Pebble, or per file)
	}
	if err != nil {
		return true
	}
	now := fsys.BootID()
	return now == "" || strings.TrimSpace(string(b)) != now
}

// hasBootMarker reports whether dst has a boot marker (for a deliberate
// bug of the simulation: see simbug.TrustUnmarked).
func hasBootMarker(fsys localfs.FS, dst string) bool {
	_, err := fsys.Lstat(bootMarker(dst))
	return err == nil
}

// checkDigests verifies every file of rec under root against its size and
// SHA-256 (a state directory whose unsynced writes a machine crash may
// have lost).
func checkDigests(fsys localfs.FS, root string, rec *Record) error {
	for owner, files := range rec.Files {
		for _, f := range files {
			if err := checkFileDigest(fsys, localPath(root, rec, owner, f), f); err != nil {
				return fmt.Errorf("owner %q file %s: %w", owner, f.Path, err)
			}
		}
	}
	return nil
}

func checkFileDigest(fsys localfs.FS, p string, f FileRef) error {
	fh, err := fsys.Open(p)
	if err != nil {
		return err
	}
	defer fh.Close()
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(fh, f.Size+1))
	if err != nil {
		return err
	}
	if n != f.Size || hex.EncodeToString(h.Sum(nil)) != f.SHA256 {
		return fmt.Errorf("%w: size %d or sha256 differs from the record", ErrCorrupt, n)
	}
	return nil
}
