package savepoint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/tidemark-io/tidemark/archive"
	"github.com/tidemark-io/tidemark/blobstore"
)

// Verdict is what Scrub found of one savepoint.
type Verdict struct {
	Label  string
	Format Format
	// Files and Bytes are the savepoint's files and their total size
	// (FormatArchive: the archive's, once read).
	Files int
	Bytes int64
	// Damage is nil when the savepoint is whole; otherwise it wraps
	// archive.ErrCorrupt and says what is wrong with the object at Key.
	Damage error
	// Key is the damaged object: the savepoint's own, or a content
	// object it references. Missing says it is gone.
	Key     string
	Missing bool
	// Path is the file the damaged content object holds.
	Path string
}

// Scrub reads and checks every savepoint of bs, holding one shared lock
// (so no delete runs meanwhile): archives to their end, manifests and
// every content object they reference, each content object once however
// many savepoints share it. It writes nothing but its lock. The error is
// for what is no verdict (the store fails, ctx ends).
func Scrub(ctx context.Context, bs blobstore.Blobstore, opts Options) ([]Verdict, error) {
	opts = opts.withDefaults()
	pin, err := acquire(ctx, bs, shared, "scrub savepoints", opts.Locks)
	switch {
	case errors.Is(err, ErrLocked), ctx.Err() != nil:
		return nil, fmt.Errorf("savepoint: scrub: %w", err)
	case err == nil:
		defer pin.release(ctx)
	}
	var verdicts []Verdict
	users := map[string][]int{} // content digest → the verdicts of the savepoints using it
	contents := map[string]archive.File{}
	for o, err := range bs.List(ctx, LabelPrefix) {
		if err != nil {
			return nil, fmt.Errorf("savepoint: scrub: list: %w", err)
		}
		if Class(o.Key) != "label" {
			continue
		}
		v := Verdict{Label: o.Key[len(LabelPrefix):], Key: o.Key}
		sp, err := open(ctx, bs, v.Label, opts)
		switch {
		case errors.Is(err, blobstore.ErrNotFound):
			v.Damage, v.Missing = fmt.Errorf("%w: deleted since the listing", archive.ErrCorrupt), true
		case isDamage(err):
			v.Damage = err
		case err != nil:
			return nil, fmt.Errorf("savepoint: scrub: %w", err)
		case sp.Format == FormatArchive:
			v.Format = FormatArchive
			m, err := sp.Verify(ctx)
			sp.Close()
			switch {
			case isDamage(err):
				v.Damage = err
			case err != nil:
				return nil, fmt.Errorf("savepoint: scrub: %w", err)
			default:
				v.Files, v.Bytes = len(m.Files), m.TotalSize()
			}
		default:
			v.Format, v.Files, v.Bytes = FormatManifest, len(sp.Manifest.Files), sp.Manifest.TotalSize()
			for _, f := range distinct(sp.Manifest.Files) {
				users[f.SHA256] = append(users[f.SHA256], len(verdicts))
				contents[f.SHA256] = f
			}
		}
		verdicts = append(verdicts, v)
	}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(opts.Concurrency)
	rbs := blobstore.WithResumingReads(bs, blobstore.DefaultReadResumptions)
	for d, f := range contents {
		g.Go(func() error {
			missing, err := checkContent(gctx, rbs, f)
			if !isDamage(err) {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			for _, i := range users[d] {
				if verdicts[i].Damage == nil {
					verdicts[i].Damage, verdicts[i].Key, verdicts[i].Missing, verdicts[i].Path = err, ContentKey(d), missing, f.Path
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, fmt.Errorf("savepoint: scrub: %w", err)
	}
	return verdicts, nil
}

// DamageError is the error of a read that found a content object
// damaged or missing (Savepoint.Verify, Scrub): it names the object and
// the file it holds, and wraps archive.ErrCorrupt.
type DamageError struct {
	Key     string
	Path    string
	Missing bool
	Err     error
}

func (e *DamageError) Error() string {
	if e.Missing {
		return fmt.Sprintf("content object %s (%s) is missing: %v", e.Key, e.Path, e.Err)
	}
	return fmt.Sprintf("content object %s: %v", e.Key, e.Err)
}

func (e *DamageError) Unwrap() error { return e.Err }

// checkContent reads the content object of f and checks its size and
// digest. Damage is a *DamageError.
func checkContent(ctx context.Context, bs blobstore.Blobstore, f archive.File) (missing bool, err error) {
	key := ContentKey(f.SHA256)
	rc, err := bs.Get(ctx, key)
	if errors.Is(err, blobstore.ErrNotFound) {
		return true, &DamageError{Key: key, Path: f.Path, Missing: true, Err: fmt.Errorf("%w: %w", archive.ErrCorrupt, err)}
	}
	if err != nil {
		return false, err
	}
	defer rc.Close()
	if _, err := io.Copy(io.Discard, newVerifier(rc, f)); err != nil {
		if isDamage(err) {
			err = &DamageError{Key: key, Path: f.Path, Err: err}
		}
		return false, err
	}
	return false, nil
}

// isDamage reports whether err is a verdict on the data (not a failure to
// reach it).
func isDamage(err error) bool {
	return errors.Is(err, archive.ErrCorrupt) || errors.Is(err, blobstore.ErrChecksum)
}
