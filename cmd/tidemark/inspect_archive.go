package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tidemark-io/tidemark/archive"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
)

// A savepoint of state in remote mode is opened in place: its archive is
// located (a ranged read per file header), the small local part of each
// owner (MANIFEST, OPTIONS, catalog, WAL) is downloaded, and the tables
// are read from the archive object by range through archiveView. So a
// savepoint of any size opens at once, as its checkpoint would.

// rangeSeeker reads one object of a Blobstore as an io.ReadSeeker, by
// ranged reads of at least a buffer.
type rangeSeeker struct {
	ctx      context.Context
	bs       blobstore.Blobstore
	key      string
	size     int64
	pos      int64
	buf      []byte
	bufStart int64
}

const rangeSeekerBuffer = 64 << 10

func (r *rangeSeeker) Read(p []byte) (int, error) {
	if r.pos >= r.size {
		return 0, io.EOF
	}
	if r.pos < r.bufStart || r.pos >= r.bufStart+int64(len(r.buf)) {
		n := min(int64(rangeSeekerBuffer), r.size-r.pos)
		rc, err := r.bs.GetRange(r.ctx, r.key, r.pos, n)
		if err != nil {
			return 0, err
		}
		buf := make([]byte, n)
		_, err = io.ReadFull(rc, buf)
		rc.Close()
		if err != nil {
			return 0, fmt.Errorf("read %s at %d: %w", r.key, r.pos, err)
		}
		r.buf, r.bufStart = buf, r.pos
	}
	n := copy(p, r.buf[r.pos-r.bufStart:])
	r.pos += int64(n)
	return n, nil
}

func (r *rangeSeeker) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += r.pos
	case io.SeekEnd:
		offset += r.size
	default:
		return 0, errors.New("seek: bad whence")
	}
	if offset < 0 {
		return 0, errors.New("seek: negative position")
	}
	r.pos = offset
	return offset, nil
}

// archiveView is a read-only Blobstore of the files of one archive stored
// in bs at key, each read by range at its offset.
type archiveView struct {
	bs    blobstore.Blobstore
	key   string
	files map[string]archive.Located
	keys  []string // sorted
}

var _ blobstore.Blobstore = (*archiveView)(nil)

var errReadOnlyView = errors.New("a savepoint is read-only here")

func (v *archiveView) file(key string) (archive.Located, error) {
	f, ok := v.files[key]
	if !ok {
		return f, fmt.Errorf("%q is not in savepoint %s: %w", key, v.key, blobstore.ErrNotFound)
	}
	return f, nil
}

func (v *archiveView) Put(context.Context, string, io.Reader) error { return errReadOnlyView }
func (v *archiveView) PutIfAbsent(context.Context, string, io.Reader) (string, error) {
	return "", errReadOnlyView
}
func (v *archiveView) PutIfMatch(context.Context, string, string, io.Reader) (string, error) {
	return "", errReadOnlyView
}
func (v *archiveView) Delete(context.Context, string) error { return errReadOnlyView }

func (v *archiveView) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	return v.GetRange(ctx, key, 0, -1)
}

func (v *archiveView) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	f, err := v.file(key)
	if err != nil {
		return nil, err
	}
	if off < 0 {
		return nil, fmt.Errorf("get %s: negative offset %d", key, off)
	}
	off = min(off, f.Size)
	if n < 0 || off+n > f.Size {
		n = f.Size - off
	}
	if n == 0 {
		return io.NopCloser(strings.NewReader("")), nil
	}
	return v.bs.GetRange(ctx, v.key, f.Offset+off, n)
}

func (v *archiveView) Stat(_ context.Context, key string) (blobstore.ObjectInfo, error) {
	f, err := v.file(key)
	if err != nil {
		return blobstore.ObjectInfo{}, err
	}
	return blobstore.ObjectInfo{Key: key, Size: f.Size, ETag: f.SHA256}, nil
}

func (v *archiveView) Exists(_ context.Context, key string) (bool, error) {
	_, ok := v.files[key]
	return ok, nil
}

func (v *archiveView) List(_ context.Context, prefix string) iter.Seq2[blobstore.ObjectInfo, error] {
	return func(yield func(blobstore.ObjectInfo, error) bool) {
		for _, k := range v.keys {
			if strings.HasPrefix(k, prefix) {
				f := v.files[k]
				if !yield(blobstore.ObjectInfo{Key: k, Size: f.Size, ETag: f.SHA256}, nil) {
					return
				}
			}
		}
	}
}

// openSavepointInPlace opens savepoint label of bs in place when it is a
// plain archive of state in remote mode: ok false (and no error) when it
// is not, so the caller extracts it instead.
func openSavepointInPlace(ctx context.Context, bs blobstore.Blobstore, label, tmp string, snap *snapshot) (ok bool, err error) {
	key := checkpoint.SavepointKey(label)
	info, err := bs.Stat(ctx, key)
	if err != nil {
		return false, err
	}
	m, located, err := archive.Locate(ctx, &rangeSeeker{ctx: ctx, bs: bs, key: key, size: info.Size}, archive.Limits{})
	if errors.Is(err, archive.ErrCompressed) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	rec, err := checkpoint.DecodeRecord(m.Record)
	if err != nil {
		return false, fmt.Errorf("savepoint %s: %w", label, err)
	}
	view := &archiveView{bs: bs, key: key, files: map[string]archive.Located{}}
	var local []archive.Located
	for _, f := range located {
		if strings.HasPrefix(f.Path, archive.RemotePrefix) {
			view.files[f.Path] = f
			view.keys = append(view.keys, f.Path)
		} else {
			local = append(local, f)
		}
	}
	if len(view.files) == 0 {
		return false, nil // local state: its tables must be on disk
	}
	slices.Sort(view.keys)
	dir := filepath.Join(tmp, "savepoint")
	for _, f := range local {
		rel, _ := strings.CutPrefix(f.Path, archive.StatePrefix)
		if err := downloadVerified(ctx, bs, key, f, filepath.Join(dir, filepath.FromSlash(rel))); err != nil {
			return false, fmt.Errorf("savepoint %s: %w", label, err)
		}
	}
	snap.Checkpoint, snap.Remote = rec.ID, true
	if snap.st, err = openReadOnly(ctx, dir, filepath.Join(tmp, "work"), view, true); err != nil {
		return false, err
	}
	return true, nil
}

// downloadVerified writes the content of archive file f (in object key
// of bs) to path, checking its size and SHA-256.
func downloadVerified(ctx context.Context, bs blobstore.Blobstore, key string, f archive.Located, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	defer out.Close()
	h := sha256.New()
	if f.Size > 0 {
		rc, err := bs.GetRange(ctx, key, f.Offset, f.Size)
		if err != nil {
			return err
		}
		defer rc.Close()
		n, err := io.Copy(io.MultiWriter(out, h), rc)
		if err != nil {
			return fmt.Errorf("%s: %w", f.Path, err)
		}
		if n != f.Size {
			return fmt.Errorf("%s: %w: %d bytes, the manifest says %d", f.Path, archive.ErrCorrupt, n, f.Size)
		}
	}
	if sum := hex.EncodeToString(h.Sum(nil)); sum != f.SHA256 {
		return fmt.Errorf("%s: %w: sha256 %s, the manifest says %s", f.Path, archive.ErrCorrupt, sum, f.SHA256)
	}
	return out.Close()
}
