package savepoint

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/tidemark-io/tidemark/archive"
	"github.com/tidemark-io/tidemark/blobstore"
)

// DeleteStats say what Delete and Sweep removed.
type DeleteStats struct {
	// Objects and Bytes are the content objects deleted.
	Objects int
	Bytes   int64
	// Kept and KeptBytes are unreferenced content objects younger than
	// the grace period, left for a later Delete or Sweep.
	Kept      int
	KeptBytes int64
}

// Delete removes savepoint label from bs, then the content no other
// savepoint references (Sweep). A savepoint in FormatArchive is one
// object, deleted alone. For one in FormatManifest it first takes the
// exclusive lock, so a create that found content present and skipped
// uploading it cannot be running; if a create, copy, import or read holds
// the area past opts.Locks.Wait, it fails with ErrLocked and changes
// nothing. A missing savepoint wraps blobstore.ErrNotFound.
func Delete(ctx context.Context, bs blobstore.Blobstore, label string, opts Options) (DeleteStats, error) {
	opts = opts.withDefaults()
	key := LabelKey(label)
	info, err := Stat(ctx, bs, label)
	switch {
	case errors.Is(err, archive.ErrCorrupt):
		info.Format = FormatManifest // a damaged manifest is deleted like a whole one
	case err != nil:
		return DeleteStats{}, fmt.Errorf("savepoint: delete %q: %w", label, err)
	}
	if info.Format == FormatArchive {
		if err := bs.Delete(ctx, key); err != nil {
			return DeleteStats{}, fmt.Errorf("savepoint: delete %q: %w", label, err)
		}
		return DeleteStats{}, nil
	}
	l, err := acquire(ctx, bs, exclusive, "delete savepoint "+label, opts.Locks)
	if err != nil {
		return DeleteStats{}, fmt.Errorf("savepoint: delete %q: %w", label, err)
	}
	defer l.release(ctx)
	if err := bs.Delete(ctx, key); err != nil {
		return DeleteStats{}, fmt.Errorf("savepoint: delete %q: %w", label, err)
	}
	st, err := sweep(ctx, bs, l, opts)
	if err != nil {
		return st, fmt.Errorf("savepoint: delete %q: removed, but its content was not freed: %w", label, err)
	}
	return st, nil
}

// Sweep removes the content objects no savepoint of bs references and
// older than opts.Grace: what a delete interrupted mid-way, or a create
// that failed, left. It holds the exclusive lock, as Delete does.
func Sweep(ctx context.Context, bs blobstore.Blobstore, opts Options) (DeleteStats, error) {
	opts = opts.withDefaults()
	l, err := acquire(ctx, bs, exclusive, "sweep savepoints", opts.Locks)
	if err != nil {
		return DeleteStats{}, fmt.Errorf("savepoint: sweep: %w", err)
	}
	defer l.release(ctx)
	st, err := sweep(ctx, bs, l, opts)
	if err != nil {
		return st, fmt.Errorf("savepoint: sweep: %w", err)
	}
	return st, nil
}

// sweep deletes unreferenced content while l (exclusive) is held. Every
// manifest is read first: while one cannot be read, nothing is deleted.
func sweep(ctx context.Context, bs blobstore.Blobstore, l *lock, opts Options) (DeleteStats, error) {
	var st DeleteStats
	refs, err := referenced(ctx, bs, opts)
	if err != nil {
		return st, err
	}
	now := l.serverTime
	var drop []blobstore.ObjectInfo
	for o, err := range bs.List(ctx, ContentPrefix) {
		if err != nil {
			return st, fmt.Errorf("list %s: %w", ContentPrefix, err)
		}
		d, ok := digestOfKey(o.Key)
		if !ok {
			continue // not ours to judge
		}
		if _, ok := refs[digestBytes(d)]; ok {
			continue
		}
		if now.Sub(o.ModTime) < opts.Grace {
			st.Kept++
			st.KeptBytes += o.Size
			continue
		}
		drop = append(drop, o)
	}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(opts.Concurrency)
	for _, o := range drop {
		g.Go(func() error {
			if err := l.held(); err != nil {
				return err
			}
			if err := bs.Delete(gctx, o.Key); err != nil {
				return fmt.Errorf("delete %s: %w", o.Key, err)
			}
			mu.Lock()
			st.Objects++
			st.Bytes += o.Size
			mu.Unlock()
			return nil
		})
	}
	return st, g.Wait()
}

// referenced returns the digests every manifest of bs names.
func referenced(ctx context.Context, bs blobstore.Blobstore, opts Options) (map[[32]byte]struct{}, error) {
	refs := map[[32]byte]struct{}{}
	for o, err := range bs.List(ctx, LabelPrefix) {
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", LabelPrefix, err)
		}
		if Class(o.Key) != "label" {
			continue
		}
		if err := addRefs(ctx, bs, o.Key, opts, refs); err != nil {
			return nil, fmt.Errorf("no content freed while manifest %s cannot be read: %w", o.Key, err)
		}
	}
	return refs, nil
}

func addRefs(ctx context.Context, bs blobstore.Blobstore, key string, opts Options, refs map[[32]byte]struct{}) error {
	rc, err := bs.Get(ctx, key)
	if errors.Is(err, blobstore.ErrNotFound) {
		return nil // deleted since the listing (its content is judged without it)
	}
	if err != nil {
		return err
	}
	defer rc.Close()
	br := bufio.NewReaderSize(rc, 64<<10)
	head, _ := br.Peek(len(manifestMagic))
	if sniff(head) == FormatArchive {
		return nil // holds its own files
	}
	m, _, err := decodeObject(br, opts.Limits)
	if err != nil {
		return err
	}
	for _, f := range m.Files {
		refs[digestBytes(f.SHA256)] = struct{}{}
	}
	return nil
}

// digestBytes returns the 32 bytes of a valid hex digest.
func digestBytes(d string) [32]byte {
	var b [32]byte
	_, _ = hex.Decode(b[:], []byte(d))
	return b
}
