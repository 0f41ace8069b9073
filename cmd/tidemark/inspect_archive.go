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
	"github.com/tidemark-io/tidemark/savepoint"
)

// A savepoint of state in remote mode is opened in place: the small
// local part of each owner (MANIFEST, OPTIONS, catalog, WAL) is
// downloaded, and the tables are read by range through archiveView, from
// their content objects (a savepoint stored by content) or from the
// archive object, located by a ranged read per file header (one stored
// whole). So a savepoint of any size opens at once, as its checkpoint
// would.

// objectReaderAt reads one object of a Blobstore at any offset, a ranged
// read per call (safe for concurrent use).
type objectReaderAt struct {
	ctx context.Context
	bs  blobstore.Blobstore
	key string
}

func (r objectReaderAt) ReadAt(p []byte, off int64) (int, error) {
	rc, err := r.bs.GetRange(r.ctx, r.key, off, int64(len(p)))
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	n, err := io.ReadFull(rc, p)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		err = io.EOF
	}
	return n, err
}

// archiveView is a read-only Blobstore of the files of one savepoint
// (label), each read by range from the object that holds it.
type archiveView struct {
	bs    blobstore.Blobstore
	label string
	files map[string]viewFile
	keys  []string // sorted
}

// viewFile is where a file of a savepoint is: Size bytes at Offset of
// the object at Key.
type viewFile struct {
	archive.File
	Key    string
	Offset int64
}

var _ blobstore.Blobstore = (*archiveView)(nil)

var errReadOnlyView = errors.New("a savepoint is read-only here")

func (v *archiveView) file(key string) (viewFile, error) {
	f, ok := v.files[key]
	if !ok {
		return f, fmt.Errorf("%q is not in savepoint %s: %w", key, v.label, blobstore.ErrNotFound)
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
	return v.bs.GetRange(ctx, f.Key, f.Offset+off, n)
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

// openSavepointInPlace opens savepoint label of bs in place when it is
// of state in remote mode, stored by content or as a plain archive: ok
// false (and no error) when it is not, so the caller extracts it instead.
func openSavepointInPlace(ctx context.Context, bs blobstore.Blobstore, label, tmp string, snap *snapshot) (ok bool, err error) {
	sp, err := savepoint.Open(ctx, bs, label, savepoint.Options{})
	if err != nil {
		return false, err
	}
	var m *archive.Manifest
	var files []viewFile
	if sp.Format == savepoint.FormatManifest {
		// Pinned until the snapshot closes: its tables are read from
		// the content objects.
		done := snap.cleanup
		snap.cleanup = func() { sp.Close(); done() }
		m = sp.Manifest
		for _, f := range m.Files {
			files = append(files, viewFile{File: f, Key: savepoint.ContentKey(f.SHA256)})
		}
	} else {
		sp.Close()
		key := checkpoint.SavepointKey(label)
		info, err := bs.Stat(ctx, key)
		if err != nil {
			return false, err
		}
		var located []archive.Located
		m, located, err = archive.Locate(ctx, objectReaderAt{ctx, bs, key}, info.Size, archive.Limits{})
		if errors.Is(err, archive.ErrCompressed) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		for _, f := range located {
			files = append(files, viewFile{File: archive.File{Path: f.Path, Size: f.Size, SHA256: f.SHA256}, Key: key, Offset: f.Offset})
		}
	}
	rec, err := checkpoint.DecodeRecord(m.Record)
	if err != nil {
		return false, fmt.Errorf("savepoint %s: %w", label, err)
	}
	view := &archiveView{bs: bs, label: label, files: map[string]viewFile{}}
	var local []viewFile
	for _, f := range files {
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
		if err := downloadVerified(ctx, bs, f, filepath.Join(dir, filepath.FromSlash(rel))); err != nil {
			return false, fmt.Errorf("savepoint %s: %w", label, err)
		}
	}
	snap.Checkpoint, snap.Remote = rec.ID, true
	if snap.st, err = openReadOnly(ctx, dir, filepath.Join(tmp, "work"), view, true); err != nil {
		return false, err
	}
	return true, nil
}

// downloadVerified writes the content of savepoint file f (in bs) to
// path, checking its size and SHA-256.
func downloadVerified(ctx context.Context, bs blobstore.Blobstore, f viewFile, path string) error {
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
		rc, err := bs.GetRange(ctx, f.Key, f.Offset, f.Size)
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
