package savepoint

import (
	"context"
	"strings"

	"github.com/tidemark-io/tidemark/archive"
	"github.com/tidemark-io/tidemark/blobstore"
)

// KnownDigests returns the files under prefix (an archive path prefix,
// such as archive.RemotePrefix) that the newest savepoint of bs in
// FormatManifest lists, by path, with their sizes and digests: what a
// new savepoint of the same immutable objects need not read again to
// hash. Best effort: a store without such a savepoint, or whose newest
// manifest cannot be read, knows nothing (an empty map).
func KnownDigests(ctx context.Context, bs blobstore.Blobstore, prefix string, opts Options) map[string]archive.File {
	opts = opts.withDefaults()
	known := map[string]archive.File{}
	var newest blobstore.ObjectInfo
	for o, err := range bs.List(ctx, LabelPrefix) {
		if err != nil {
			return known
		}
		if Class(o.Key) == "label" && o.ModTime.After(newest.ModTime) {
			newest = o
		}
	}
	if newest.Key == "" {
		return known
	}
	sp, err := open(ctx, bs, strings.TrimPrefix(newest.Key, LabelPrefix), opts)
	if err != nil {
		return known
	}
	defer sp.Close()
	if sp.Format != FormatManifest {
		return known
	}
	for _, f := range sp.Manifest.Files {
		if strings.HasPrefix(f.Path, prefix) {
			known[f.Path] = f
		}
	}
	return known
}
