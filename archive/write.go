package archive

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"
)

// WriteOptions configure Write. The zero value writes a plain tar that a
// reader with the default Limits accepts.
type WriteOptions struct {
	// Compress zstd-compresses the whole stream (default level, one
	// encoder goroutine, 8 MiB window, one frame).
	Compress bool
	// Limits are those of the readers the archive is meant for: Write
	// refuses, before writing anything, a manifest they would refuse
	// (more than MaxFiles files, over MaxTotalBytes in total, or encoded
	// over MaxManifestBytes), so that whatever Write accepts can be read
	// back. Zero fields take their defaults, as for readers.
	Limits Limits
}

// OpenFunc opens the content of the archive file at path for Write.
type OpenFunc func(ctx context.Context, path string) (io.ReadCloser, error)

// epoch is the modification time of every entry. Archives carry no
// timestamps of their own, so the same checkpoint always produces the same
// bytes.
var epoch = time.Unix(0, 0)

// Write streams an archive of m to w: the manifest, then every file of
// m.Files in order, its content read from open(ctx, path). Each file's size
// and SHA-256 are checked while it is copied (one pass); if a source
// disagrees with the manifest, Write fails with an error wrapping
// ErrCorrupt that names the file, and what was written to w must be
// discarded. m must pass the same checks Read applies (version, record,
// paths, sizes, digests, layout, opts.Limits); w is not closed.
func Write(ctx context.Context, w io.Writer, m *Manifest, open OpenFunc, opts WriteOptions) (err error) {
	manifest, err := EncodeManifest(m, opts.Limits)
	if err != nil {
		return fmt.Errorf("archive: write: %w", err)
	}

	out := w
	if opts.Compress {
		// One goroutine: the checkpoint engine runs several writes at
		// once and memory must stay bounded per write.
		enc, err := zstd.NewWriter(w, zstd.WithEncoderConcurrency(1))
		if err != nil {
			return fmt.Errorf("archive: write: %w", err)
		}
		defer func() {
			// Close flushes the final frame; on failure the output is
			// garbage anyway, but Close still releases the encoder.
			if cerr := enc.Close(); err == nil && cerr != nil {
				err = fmt.Errorf("archive: write: compress: %w", cerr)
			}
		}()
		out = enc
	}

	tw := tar.NewWriter(out)
	if err := tw.WriteHeader(header(ManifestName, int64(len(manifest)))); err != nil {
		return fmt.Errorf("archive: write %q: %w", ManifestName, err)
	}
	if _, err := tw.Write(manifest); err != nil {
		return fmt.Errorf("archive: write %q: %w", ManifestName, err)
	}
	for _, f := range m.Files {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("archive: write %q: %w", f.Path, err)
		}
		if err := writeFile(ctx, tw, f, open); err != nil {
			return err
		}
	}
	// Close writes the end-of-archive marker; without the zstd Close
	// above it is still buffered in the encoder.
	if err := tw.Close(); err != nil {
		return fmt.Errorf("archive: write: %w", err)
	}
	return nil
}

func header(name string, size int64) *tar.Header {
	return &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     name,
		Size:     size,
		Mode:     0o644,
		ModTime:  epoch,
	}
}

func writeFile(ctx context.Context, tw *tar.Writer, f File, open OpenFunc) error {
	rc, err := open(ctx, f.Path)
	if err != nil {
		return fmt.Errorf("archive: write %q: %w", f.Path, err)
	}
	defer rc.Close()
	if err := tw.WriteHeader(header(f.Path, f.Size)); err != nil {
		return fmt.Errorf("archive: write %q: %w", f.Path, err)
	}
	h := sha256.New()
	src := &ctxReader{ctx: ctx, r: rc}
	// Copy exactly the declared size: the tar header is already written,
	// so a longer source must not spill into the next entry.
	n, err := io.CopyN(io.MultiWriter(tw, h), src, f.Size)
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("archive: write: %w", corrupt(f.Path, "source has %d bytes, manifest says %d", n, f.Size))
	}
	if err != nil {
		return fmt.Errorf("archive: write %q: %w", f.Path, err)
	}
	var one [1]byte
	if k, err := io.ReadFull(src, one[:]); k > 0 {
		return fmt.Errorf("archive: write: %w", corrupt(f.Path, "source is longer than the %d bytes the manifest says", f.Size))
	} else if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("archive: write %q: %w", f.Path, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != f.SHA256 {
		return fmt.Errorf("archive: write: %w", corrupt(f.Path, "source sha256 %s, manifest says %s", got, f.SHA256))
	}
	return nil
}

// ctxReader makes a long copy stop soon after ctx is cancelled.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// DirFiles hashes every regular file under dir, recursively, and returns
// their Files sorted by path, each path being prefix + "/" + the file's
// slash-separated path relative to dir (a trailing '/' on prefix is
// ignored). Typically prefix is StatePrefix + owner. It refuses symbolic
// links, devices, sockets and FIFOs inside dir, and paths that
// ValidatePath rejects. Directories contribute only their files; an empty
// directory does not appear in the archive.
func DirFiles(ctx context.Context, dir, prefix string) ([]File, error) {
	prefix = strings.TrimSuffix(prefix, "/")
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("archive: hash %q: %w", dir, err)
	}
	defer root.Close()
	var files []File
	err = fs.WalkDir(root.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file (%s)", rel, d.Type())
		}
		p := path.Join(prefix, rel)
		if err := ValidatePath(p); err != nil {
			return err
		}
		f, err := hashFile(ctx, root, rel)
		if err != nil {
			return err
		}
		f.Path = p
		files = append(files, f)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("archive: hash %q: %w", dir, err)
	}
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	return files, nil
}

func hashFile(ctx context.Context, root *os.Root, rel string) (File, error) {
	fh, err := root.Open(filepath.FromSlash(rel))
	if err != nil {
		return File{}, err
	}
	defer fh.Close()
	h := sha256.New()
	n, err := io.Copy(h, &ctxReader{ctx: ctx, r: fh})
	if err != nil {
		return File{}, err
	}
	return File{Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// DirOpener returns an OpenFunc for Write that serves the archive paths
// prefix + "/" + rel (as DirFiles named them) from dir/rel. Other paths
// fail. Files are opened through an os.Root, so no path or symbolic link
// can reach outside dir; what is read is verified against the manifest by
// Write anyway.
func DirOpener(dir, prefix string) OpenFunc {
	prefix = strings.TrimSuffix(prefix, "/") + "/"
	return func(ctx context.Context, p string) (io.ReadCloser, error) {
		rel, ok := strings.CutPrefix(p, prefix)
		if !ok {
			return nil, fmt.Errorf("archive: open %q: not under %q: %w", p, prefix, fs.ErrNotExist)
		}
		root, err := os.OpenRoot(dir)
		if err != nil {
			return nil, err
		}
		defer root.Close() // an open file outlives its Root
		fh, err := root.Open(filepath.FromSlash(rel))
		if err != nil {
			return nil, err
		}
		if fi, err := fh.Stat(); err != nil || !fi.Mode().IsRegular() {
			fh.Close()
			if err == nil {
				err = fmt.Errorf("archive: open %q: not a regular file", p)
			}
			return nil, err
		}
		return fh, nil
	}
}
