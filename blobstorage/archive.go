package blobstorage

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/tidemark-io/tidemark/archive"
)

// ArchiveFiles returns the archive entries of checkpoint id (paths
// state/<owner>/<path>, sorted, with sizes and digests from the record)
// and an OpenFunc that streams each from the store. archive.Write checks
// every byte against the digest as it copies.
//
// The remote objects of state in remote mode (Record.Remote) are archived
// too, under their keys (archive.RemotePrefix is RemotePrefix + "/"), so
// that the archive is self-contained: the record holds no digest of
// them, so each is read once to hash it before the archive is written
// (and again, checked against that digest, as it is written).
//
// No restore pin is held: the caller archives a checkpoint GC retains
// (checkpoint.CreateSavepoint archives the latest completed one, which GC always
// keeps). A file GC deleted meanwhile fails the archive, never corrupts it.
func (s *Storage) ArchiveFiles(ctx context.Context, id string) ([]archive.File, archive.OpenFunc, error) {
	return s.ArchiveFilesKnowing(ctx, id, nil)
}

// ArchiveFilesKnowing is ArchiveFiles, taking the digest of a remote
// object from known where known has it (for its key and size) instead of
// reading the object to hash it. Remote objects are immutable and their
// names never reused (a generation's nonce is random), so a digest an
// earlier savepoint recorded for a key is the key's digest; the bytes are
// still checked against it wherever they are read.
func (s *Storage) ArchiveFilesKnowing(ctx context.Context, id string, known func(key string, size int64) (string, bool)) ([]archive.File, archive.OpenFunc, error) {
	rec, err := s.LoadRecord(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	keys := map[string]string{}
	var files []archive.File
	for owner, refs := range rec.Files {
		for _, f := range refs {
			p := path.Join(archive.StatePrefix+owner, f.Path)
			keys[p] = f.Key
			files = append(files, archive.File{Path: p, Size: f.Size, SHA256: f.SHA256})
		}
	}
	remote, err := s.remoteArchiveFiles(ctx, rec, known)
	if err != nil {
		return nil, nil, err
	}
	for _, f := range remote {
		keys[f.Path] = f.Path // the archive path is the key
	}
	files = append(files, remote...)
	slices.SortFunc(files, func(a, b archive.File) int { return strings.Compare(a.Path, b.Path) })
	open := func(ctx context.Context, p string) (io.ReadCloser, error) {
		key, ok := keys[p]
		if !ok {
			return nil, fmt.Errorf("blobstorage: archive %q: no file %q: %w", id, p, fs.ErrNotExist)
		}
		rc, err := s.files.Get(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("blobstorage: archive %q: file %q: %w", id, p, err)
		}
		return rc, nil
	}
	return files, open, nil
}
