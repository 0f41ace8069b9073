package savepoint

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tidemark-io/tidemark/archive"
	"github.com/tidemark-io/tidemark/blobstore"
)

// ErrExists is returned (wrapped, together with
// blobstore.ErrPreconditionFailed) by Put, Import and Copy without
// Options.Replace when the label is taken.
var ErrExists = errors.New("savepoint: label taken")

// Defaults of Options.
const (
	DefaultConcurrency = 8
	DefaultGrace       = time.Hour
)

// Options configure the operations of this package. The zero value takes
// the defaults.
type Options struct {
	// Concurrency bounds parallel uploads, downloads and presence checks.
	// Default: DefaultConcurrency (8).
	Concurrency int
	// Replace lets Put, Import and Copy replace a savepoint of the label.
	// Without it the manifest is written with PutIfAbsent and a taken
	// label fails with ErrExists.
	Replace bool
	// Limits bound the manifests read and written (as an archive's).
	Limits archive.Limits
	// Locks tune the locks (see ErrLocked).
	Locks LockOptions
	// Grace is how old unreferenced content must be before Delete and
	// Sweep remove it, so that an interrupted copy or import resumed
	// within it resends nothing. Default: DefaultGrace (1h); negative:
	// no grace.
	Grace time.Duration
}

func (o Options) withDefaults() Options {
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	switch {
	case o.Grace == 0:
		o.Grace = DefaultGrace
	case o.Grace < 0:
		o.Grace = 0
	}
	return o
}

// Stats say what an operation stored.
type Stats struct {
	// Files and Bytes are the savepoint's files and their total size.
	Files int
	Bytes int64
	// Objects and ObjectBytes are its distinct contents.
	Objects     int
	ObjectBytes int64
	// Uploaded and UploadedBytes are the content objects this operation
	// wrote: those the store lacked.
	Uploaded      int
	UploadedBytes int64
}

// Put stores the savepoint of manifest m under label in bs: it uploads
// the content of each file the savepoint area lacks (read with open and
// checked against m's size and SHA-256 as it streams, so no object's
// bytes disagree with its name), then publishes the manifest object last.
// Without opts.Replace that is a PutIfAbsent, so a taken label (checked
// first, and again by the write) fails with ErrExists. Put holds a shared
// lock throughout. An error leaves no manifest; content already uploaded
// stays for a retry to reuse, and Delete or Sweep removes it after the
// grace period.
func Put(ctx context.Context, bs blobstore.Blobstore, label string, m *archive.Manifest, open archive.OpenFunc, opts Options) (Stats, error) {
	opts = opts.withDefaults()
	obj, err := encodeObject(m, opts.Limits, keyIDOf(bs, m))
	if err != nil {
		return Stats{}, fmt.Errorf("savepoint: put %q: %w", label, err)
	}
	if err := checkFree(ctx, bs, label, opts); err != nil {
		return Stats{}, err
	}
	l, err := acquire(ctx, bs, shared, "create savepoint "+label, opts.Locks)
	if err != nil {
		return Stats{}, fmt.Errorf("savepoint: put %q: %w", label, err)
	}
	defer l.release(ctx)
	objects := distinct(m.Files)
	st := statsOf(m, objects)
	missing, err := absent(ctx, bs, objects, opts)
	if err != nil {
		return st, fmt.Errorf("savepoint: put %q: %w", label, err)
	}
	if hookAfterPresence != nil {
		hookAfterPresence()
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(opts.Concurrency)
	up := make([]bool, len(missing))
	for i, f := range missing {
		g.Go(func() error {
			wrote, err := putContent(gctx, bs, f, open)
			up[i] = wrote
			return err
		})
	}
	err = g.Wait()
	for i, f := range missing {
		if up[i] {
			st.Uploaded++
			st.UploadedBytes += f.Size
		}
	}
	if err != nil {
		return st, fmt.Errorf("savepoint: put %q: %w", label, err)
	}
	if err := publish(ctx, bs, label, obj, l, opts); err != nil {
		return st, err
	}
	return st, nil
}

// hookAfterPresence, set by tests only, runs in Put between the presence
// check and the uploads: where a concurrent delete does harm.
var hookAfterPresence func()

// checkFree fails with ErrExists if label is taken and opts do not say to
// replace it: the early refusal, before anything is written.
func checkFree(ctx context.Context, bs blobstore.Blobstore, label string, opts Options) error {
	if opts.Replace {
		return nil
	}
	ok, err := bs.Exists(ctx, LabelKey(label))
	switch {
	case err != nil:
		return fmt.Errorf("savepoint: %q: %w", label, err)
	case ok:
		return fmt.Errorf("savepoint: %q: %w: %w", label, ErrExists, blobstore.ErrPreconditionFailed)
	}
	return nil
}

// publish writes the manifest object, last, while l is held.
func publish(ctx context.Context, bs blobstore.Blobstore, label string, obj []byte, l *lock, opts Options) error {
	if err := l.held(); err != nil {
		return fmt.Errorf("savepoint: publish %q: %w", label, err)
	}
	key := LabelKey(label)
	var err error
	if opts.Replace {
		err = bs.Put(ctx, key, bytes.NewReader(obj))
	} else if _, err = bs.PutIfAbsent(ctx, key, bytes.NewReader(obj)); errors.Is(err, blobstore.ErrPreconditionFailed) {
		err = fmt.Errorf("%w: %w", ErrExists, err)
	}
	if err != nil {
		return fmt.Errorf("savepoint: publish %q: %w", label, err)
	}
	return nil
}

// distinct returns one File per distinct digest of files (the first to
// have it), in order.
func distinct(files []archive.File) []archive.File {
	seen := make(map[string]struct{}, len(files))
	out := make([]archive.File, 0, len(files))
	for _, f := range files {
		if _, ok := seen[f.SHA256]; !ok {
			seen[f.SHA256] = struct{}{}
			out = append(out, f)
		}
	}
	return out
}

func statsOf(m *archive.Manifest, objects []archive.File) Stats {
	st := Stats{Files: len(m.Files), Bytes: m.TotalSize(), Objects: len(objects)}
	for _, f := range objects {
		st.ObjectBytes += f.Size
	}
	return st
}

// listPageKeys is how many keys a listing request returns (S3's page).
const listPageKeys = 1000

// absent returns the objects whose content bs lacks, or holds at another
// size (damaged: rewritten by putContent). It asks with one HEAD per
// object, in parallel, or, for many objects, with one listing of the
// content area, abandoned for HEADs once it has cost more requests than
// they would.
func absent(ctx context.Context, bs blobstore.Blobstore, objects []archive.File, opts Options) ([]archive.File, error) {
	if len(objects) == 0 {
		return nil, nil
	}
	found := make(map[string]bool, len(objects)) // digest → held at its size
	if len(objects) > 4*opts.Concurrency {
		want := make(map[string]int64, len(objects))
		for _, f := range objects {
			want[f.SHA256] = f.Size
		}
		budget := len(objects) * listPageKeys
		listed := 0
		complete := true
		for o, err := range bs.List(ctx, ContentPrefix) {
			if err != nil {
				return nil, fmt.Errorf("list %s: %w", ContentPrefix, err)
			}
			if listed++; listed > budget {
				complete = false
				break
			}
			d, ok := digestOfKey(o.Key)
			if size, wanted := want[d]; ok && wanted {
				found[d] = o.Size == size
			}
		}
		if complete {
			var out []archive.File
			for _, f := range objects {
				if !found[f.SHA256] {
					out = append(out, f)
				}
			}
			return out, nil
		}
	}
	held := make([]bool, len(objects))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(2 * opts.Concurrency)
	for i, f := range objects {
		if ok, seen := found[f.SHA256]; seen {
			held[i] = ok
			continue
		}
		g.Go(func() error {
			info, err := bs.Stat(gctx, ContentKey(f.SHA256))
			switch {
			case errors.Is(err, blobstore.ErrNotFound):
				return nil
			case err != nil:
				return fmt.Errorf("stat %s: %w", ContentKey(f.SHA256), err)
			}
			held[i] = info.Size == f.Size
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	var out []archive.File
	for i, f := range objects {
		if !held[i] {
			out = append(out, f)
		}
	}
	return out, nil
}

// putContent uploads f's content, read with open and checked as it
// streams, to its content key. A content object that appeared meanwhile
// (another operation uploaded the same bytes) is kept: wrote is false. A
// content object of the wrong size (damaged) is replaced.
func putContent(ctx context.Context, bs blobstore.Blobstore, f archive.File, open archive.OpenFunc) (wrote bool, err error) {
	key := ContentKey(f.SHA256)
	rc, err := open(ctx, f.Path)
	if err != nil {
		return false, fmt.Errorf("read %q: %w", f.Path, err)
	}
	defer rc.Close()
	v := newVerifier(rc, f)
	_, err = bs.PutIfAbsent(ctx, key, v)
	if errors.Is(err, blobstore.ErrPreconditionFailed) {
		info, serr := bs.Stat(ctx, key)
		if serr == nil && info.Size == f.Size {
			return false, nil
		}
		// Damaged (or gone again): write it whole, verified.
		rc.Close()
		if rc, err = open(ctx, f.Path); err != nil {
			return false, fmt.Errorf("read %q: %w", f.Path, err)
		}
		err = bs.Put(ctx, key, newVerifier(rc, f))
	}
	if err != nil {
		return false, fmt.Errorf("upload %q as %s: %w", f.Path, key, err)
	}
	return true, nil
}

// verifier reads exactly f's content from r: past f.Size bytes, or at an
// end whose size or SHA-256 disagrees with f, it returns an error wrapping
// archive.ErrCorrupt instead of io.EOF, so a Put reading it fails and
// publishes nothing.
type verifier struct {
	r   io.Reader
	f   archive.File
	h   hash.Hash
	n   int64
	err error
}

func newVerifier(r io.Reader, f archive.File) *verifier {
	return &verifier{r: io.LimitReader(r, f.Size+1), f: f, h: sha256.New()}
}

func (v *verifier) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	n, err := v.r.Read(p)
	v.n += int64(n)
	v.h.Write(p[:n])
	switch {
	case v.n > v.f.Size:
		err = fmt.Errorf("%w: %s: longer than the %d bytes the manifest says", archive.ErrCorrupt, v.f.Path, v.f.Size)
		n = 0
	case err == io.EOF && v.n != v.f.Size:
		err = fmt.Errorf("%w: %s: %d bytes, the manifest says %d", archive.ErrCorrupt, v.f.Path, v.n, v.f.Size)
	case err == io.EOF:
		if got := fmt.Sprintf("%x", v.h.Sum(nil)); got != v.f.SHA256 {
			err = fmt.Errorf("%w: %s: sha256 %s, the manifest says %s", archive.ErrCorrupt, v.f.Path, got, v.f.SHA256)
		}
	}
	if err != nil {
		v.err = err
	}
	return n, err
}
