package savepoint

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tidemark-io/tidemark/archive"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/encrypted"
)

// Savepoint is a savepoint opened for reading (Open). Close it.
type Savepoint struct {
	// Label is its label.
	Label string
	// Format is how it is stored.
	Format Format
	// Manifest is its manifest (FormatManifest only; an archive's is
	// read with the archive).
	Manifest *archive.Manifest
	// EncryptionKeyID is the id of the master key its content objects
	// are encrypted under, as its manifest records it (FormatManifest
	// only; "" for plain content and manifests written before the field).
	EncryptionKeyID string

	bs    blobstore.Blobstore
	limit archive.Limits
	conc  int
	body  io.ReadCloser // FormatArchive: the object, from its first byte
	files map[string]archive.File
	pin   *lock
}

// Open opens savepoint label of bs for reading. A savepoint in
// FormatManifest is pinned for as long as it is open (a shared lock, so
// no Delete removes its content meanwhile), where the store lets this
// process write its lock; a store it can only read is read unpinned, and
// a content object deleted meanwhile fails the read, never corrupts it.
// Its manifest is read and checked (opts.Limits). A missing savepoint
// wraps blobstore.ErrNotFound.
func Open(ctx context.Context, bs blobstore.Blobstore, label string, opts Options) (*Savepoint, error) {
	opts = opts.withDefaults()
	pin, err := acquire(ctx, bs, shared, "read savepoint "+label, opts.Locks)
	switch {
	case errors.Is(err, ErrLocked), ctx.Err() != nil:
		return nil, fmt.Errorf("savepoint: open %q: %w", label, err)
	case err != nil:
		pin = nil // a read-only store: read unpinned
	}
	sp, err := open(ctx, bs, label, opts)
	if err != nil || sp.Format != FormatManifest {
		pin.release(ctx)
		return sp, err
	}
	sp.pin = pin
	return sp, nil
}

func open(ctx context.Context, bs blobstore.Blobstore, label string, opts Options) (*Savepoint, error) {
	rbs := blobstore.WithResumingReads(bs, blobstore.DefaultReadResumptions)
	rc, err := rbs.Get(ctx, LabelKey(label))
	if err != nil {
		return nil, fmt.Errorf("savepoint: open %q: %w", label, err)
	}
	br := bufio.NewReaderSize(rc, 64<<10)
	head, _ := br.Peek(len(manifestMagic))
	sp := &Savepoint{Label: label, Format: sniff(head), bs: rbs, limit: opts.Limits, conc: opts.Concurrency}
	if sp.Format == FormatArchive {
		sp.body = struct {
			io.Reader
			io.Closer
		}{br, rc}
		return sp, nil
	}
	defer rc.Close()
	var h header
	if sp.Manifest, h, err = decodeObject(br, opts.Limits); err != nil {
		return nil, fmt.Errorf("savepoint: open %q: %w", label, err)
	}
	// A store without the content's key is refused here, before any
	// content is read or anything is written from it.
	sp.EncryptionKeyID = h.KeyID
	if err := encrypted.CheckKey(bs, h.KeyID, "the files of savepoint "+label); err != nil {
		return nil, fmt.Errorf("savepoint: open %q: %w", label, err)
	}
	sp.files = make(map[string]archive.File, len(sp.Manifest.Files))
	for _, f := range sp.Manifest.Files {
		sp.files[f.Path] = f
	}
	return sp, nil
}

// Close releases the savepoint's pin and its reader.
func (sp *Savepoint) Close() error {
	if sp.body != nil {
		sp.body.Close()
		sp.body = nil
	}
	sp.pin.release(context.Background())
	sp.pin = nil
	return nil
}

// OpenFile is an archive.OpenFunc over the content of a savepoint in
// FormatManifest: it opens the content object of the file at path. What
// it returns is not checked: readers check it against the manifest
// (archive.Write does).
func (sp *Savepoint) OpenFile(ctx context.Context, path string) (io.ReadCloser, error) {
	f, ok := sp.files[path]
	if !ok {
		return nil, fmt.Errorf("savepoint %s: no file %q: %w", sp.Label, path, fs.ErrNotExist)
	}
	rc, err := sp.bs.Get(ctx, ContentKey(f.SHA256))
	if err != nil {
		if errors.Is(err, blobstore.ErrNotFound) {
			err = &DamageError{Key: ContentKey(f.SHA256), Path: path, Missing: true, Err: fmt.Errorf("%w: %w", archive.ErrCorrupt, err)}
		}
		return nil, fmt.Errorf("savepoint %s: %w", sp.Label, err)
	}
	return rc, nil
}

// WriteArchive writes the savepoint to w as one archive (package archive,
// a plain tar): the one it is (FormatArchive, copied as stored; readers
// verify it), or the one its manifest and content make (FormatManifest,
// every file checked against its digest as it is written). It can be
// called once.
func (sp *Savepoint) WriteArchive(ctx context.Context, w io.Writer) error {
	if sp.Format == FormatArchive {
		if sp.body == nil {
			return errors.New("savepoint: archive already read")
		}
		_, err := io.Copy(w, &ctxReader{ctx, sp.body})
		sp.body.Close()
		sp.body = nil
		if err != nil {
			return fmt.Errorf("savepoint %s: %w", sp.Label, err)
		}
		return nil
	}
	return archive.Write(ctx, w, sp.Manifest, sp.OpenFile, archive.WriteOptions{Limits: sp.limit})
}

// Archive returns WriteArchive's stream as a reader (through a pipe): an
// error of the writer is the reader's error. Closing it stops the writer
// and waits for it.
func (sp *Savepoint) Archive(ctx context.Context) io.ReadCloser {
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		pw.CloseWithError(sp.WriteArchive(ctx, pw))
	}()
	return &pipeReader{pr, done}
}

type pipeReader struct {
	*io.PipeReader
	done chan struct{}
}

func (p *pipeReader) Close() error {
	p.PipeReader.Close()
	<-p.done
	return nil
}

// Verify reads the whole savepoint and checks it: an archive to its end
// (archive.Verify), or every content object a manifest names, in
// parallel, against its size and SHA-256. It returns the manifest; a
// damaged or missing part wraps archive.ErrCorrupt and names it.
func (sp *Savepoint) Verify(ctx context.Context) (*archive.Manifest, error) {
	if sp.Format == FormatArchive {
		if sp.body == nil {
			return nil, errors.New("savepoint: archive already read")
		}
		m, err := archive.Verify(ctx, sp.body, sp.limit)
		if err != nil {
			return nil, fmt.Errorf("savepoint %s: %w", sp.Label, err)
		}
		return m, nil
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(sp.conc)
	for _, f := range distinct(sp.Manifest.Files) {
		g.Go(func() error { return sp.verifyFile(gctx, f) })
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return sp.Manifest, nil
}

func (sp *Savepoint) verifyFile(ctx context.Context, f archive.File) error {
	if _, err := checkContent(ctx, sp.bs, f); err != nil {
		return fmt.Errorf("savepoint %s: %w", sp.Label, err)
	}
	return nil
}

// ReadManifest returns the manifest of savepoint label of bs and its
// format, reading no file and taking no lock: the manifest object's, or
// the first entry of an archive. A missing savepoint wraps
// blobstore.ErrNotFound.
func ReadManifest(ctx context.Context, bs blobstore.Blobstore, label string, opts Options) (*archive.Manifest, Format, error) {
	opts = opts.withDefaults()
	sp, err := open(ctx, bs, label, opts)
	if err != nil {
		return nil, 0, err
	}
	defer sp.Close()
	if sp.Format == FormatManifest {
		return sp.Manifest, FormatManifest, nil
	}
	ar, err := archive.NewReader(ctx, sp.body, opts.Limits)
	if err != nil {
		return nil, FormatArchive, fmt.Errorf("savepoint: %q: %w", label, err)
	}
	defer ar.Close()
	return ar.Manifest(), FormatArchive, nil
}

// Info describes a savepoint without reading its files.
type Info struct {
	Label  string
	Format Format
	// Bytes is the total size of its files (FormatManifest), or of its
	// archive object (FormatArchive).
	Bytes int64
	// Files is the number of its files; -1 for an archive (it would have
	// to be read).
	Files int
	// ModTime is when its object was written.
	ModTime time.Time
	// EncryptionKeyID is the key id its manifest records (see
	// Savepoint.EncryptionKeyID).
	EncryptionKeyID string
}

// Stat describes savepoint label of bs from its object's first bytes (one
// ranged read). A missing savepoint wraps blobstore.ErrNotFound.
func Stat(ctx context.Context, bs blobstore.Blobstore, label string) (Info, error) {
	key := LabelKey(label)
	oi, err := bs.Stat(ctx, key)
	if err != nil {
		return Info{}, fmt.Errorf("savepoint: stat %q: %w", label, err)
	}
	info := Info{Label: label, Format: FormatArchive, Bytes: oi.Size, Files: -1, ModTime: oi.ModTime}
	rc, err := bs.GetRange(ctx, key, 0, maxHeaderBytes)
	if err != nil {
		return Info{}, fmt.Errorf("savepoint: stat %q: %w", label, err)
	}
	defer rc.Close()
	br := bufio.NewReaderSize(rc, maxHeaderBytes)
	head, _ := br.Peek(len(manifestMagic))
	if sniff(head) == FormatArchive {
		return info, nil
	}
	h, err := decodeHeader(br)
	if err != nil {
		return Info{}, fmt.Errorf("savepoint: stat %q: %w", label, err)
	}
	info.Format, info.Bytes, info.Files, info.EncryptionKeyID = FormatManifest, h.Bytes, h.Files, h.KeyID
	return info, nil
}

// ctxReader makes a long copy stop soon after ctx is done.
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
