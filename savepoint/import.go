package savepoint

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/tidemark-io/tidemark/archive"
	"github.com/tidemark-io/tidemark/blobstore"
)

// Import stores the archive read from r (package archive, plain or zstd)
// as savepoint label of bs in FormatManifest: it uploads each file the
// savepoint area lacks as it streams past (the archive reader checks
// every size and digest, and a file that disagrees fails its upload), and
// publishes the manifest only once the whole archive has been read and
// verified, as Put does. Files the area holds are read and checked, not
// sent.
func Import(ctx context.Context, bs blobstore.Blobstore, label string, r io.Reader, opts Options) (Stats, error) {
	opts = opts.withDefaults()
	ar, err := archive.NewReader(ctx, r, opts.Limits)
	if err != nil {
		return Stats{}, fmt.Errorf("savepoint: import %q: %w", label, err)
	}
	defer ar.Close()
	m := ar.Manifest()
	obj, err := encodeObject(m, opts.Limits, keyIDOf(bs, m))
	if err != nil {
		return Stats{}, fmt.Errorf("savepoint: import %q: %w", label, err)
	}
	if err := checkFree(ctx, bs, label, opts); err != nil {
		return Stats{}, err
	}
	l, err := acquire(ctx, bs, shared, "import savepoint "+label, opts.Locks)
	if err != nil {
		return Stats{}, fmt.Errorf("savepoint: import %q: %w", label, err)
	}
	defer l.release(ctx)
	objects := distinct(m.Files)
	st := statsOf(m, objects)
	missing, err := absent(ctx, bs, objects, opts)
	if err != nil {
		return st, fmt.Errorf("savepoint: import %q: %w", label, err)
	}
	send := make(map[string]bool, len(missing))
	for _, f := range missing {
		send[f.SHA256] = true
	}
	err = ar.ReadFiles(ctx, func(f archive.File, r io.Reader) error {
		if !send[f.SHA256] {
			return nil // held already, or sent for an earlier file: the reader checks the rest
		}
		send[f.SHA256] = false
		key := ContentKey(f.SHA256)
		// r returns an error wrapping ErrCorrupt, not io.EOF, if the
		// bytes disagree with f: the object is then not written.
		_, err := bs.PutIfAbsent(ctx, key, r)
		if errors.Is(err, blobstore.ErrPreconditionFailed) {
			return nil // uploaded meanwhile by another operation
		}
		if err != nil {
			return fmt.Errorf("upload as %s: %w", key, err)
		}
		st.Uploaded++
		st.UploadedBytes += f.Size
		return nil
	})
	if err != nil {
		return st, fmt.Errorf("savepoint: import %q: %w", label, err)
	}
	if err := publish(ctx, bs, label, obj, l, opts); err != nil {
		return st, err
	}
	return st, nil
}

// Copy copies savepoint label from src to dst, sending only the content
// dst lacks and checking every byte sent against its digest; dst's
// manifest is published last, once all its content is there (Put). An
// interrupted copy run again resends nothing that arrived (within
// Options.Grace of a Delete in dst). A savepoint in FormatArchive is read
// whole and stored in FormatManifest (Import), so its copies share
// content with every other savepoint of dst.
func Copy(ctx context.Context, src, dst blobstore.Blobstore, label string, opts Options) (Stats, error) {
	opts = opts.withDefaults()
	if err := checkFree(ctx, dst, label, opts); err != nil {
		return Stats{}, err
	}
	sp, err := Open(ctx, src, label, opts)
	if err != nil {
		return Stats{}, err
	}
	defer sp.Close()
	if sp.Format == FormatArchive {
		body := sp.body
		sp.body = nil
		defer body.Close()
		return Import(ctx, dst, label, body, opts)
	}
	return Put(ctx, dst, label, sp.Manifest, sp.OpenFile, opts)
}
