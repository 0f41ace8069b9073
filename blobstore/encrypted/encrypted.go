// Package encrypted is a Blobstore decorator that encrypts objects on the
// client side, with envelope encryption: every object gets its own random
// AES-256-GCM data key, wrapped in the object's header under a master key
// the store is given (Key), whose id the header records.
//
// Which keys are encrypted is a predicate (Options.Encrypt); by default
// the state files and savepoints of Tidemark's layout (DefaultEncrypt),
// while records, pointers, fencing tokens and pins stay plain, so that an
// operator can list and inspect a store without the key.
//
// Reads stream and authenticate chunk by chunk: a range read decrypts only
// the chunks holding the range. Sizes reported by Stat and List are the
// plaintext's; ETags are the stored objects', so conditional writes keep
// their meaning. Detect is the keyless counterpart: it refuses, naming
// the key id, reads of encrypted objects that would otherwise yield
// ciphertext. See docs/encryption.md for the format.
package encrypted

import (
	"bufio"
	"context"
	"crypto/cipher"
	"errors"
	"fmt"
	"io"
	"iter"
	"strings"

	"github.com/tidemark-io/tidemark/blobstore"
)

// Options tunes the decorator.
type Options struct {
	// Encrypt reports whether the object at key is encrypted. Nil means
	// DefaultEncrypt. Objects it rejects pass through unchanged.
	Encrypt func(key string) bool
}

// EncryptAll is a predicate that encrypts every object.
func EncryptAll(string) bool { return true }

// DefaultEncrypt is the default predicate: the keys of Tidemark's layout
// (package blobstorage) that hold state or savepoints. Those are shared
// files (shared/), remote-mode state (remote/), savepoints
// (savepoints/) and their content (savepoint-data/sha256/, package
// savepoint; its locks stay plain), a checkpoint's private files
// (checkpoints/<id>/private/...) and the files of a worker's part
// (checkpoints/<id>/parts/<epoch>/<owner>/<worker>/files/...). Records,
// part documents, pointers, _writer, _tidemark and pins are not.
func DefaultEncrypt(key string) bool {
	for _, p := range []string{"shared/", "remote/", "savepoints/", "savepoint-data/sha256/"} {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	rest, ok := strings.CutPrefix(key, "checkpoints/")
	if !ok {
		return false
	}
	seg := strings.Split(rest, "/")
	switch {
	case len(seg) >= 3 && seg[1] == "private":
		return true
	case len(seg) >= 7 && seg[1] == "parts" && seg[5] == "files":
		return true
	}
	return false
}

type store struct {
	bs      blobstore.Blobstore
	id      string
	master  cipher.AEAD
	encrypt func(string) bool
	headers headerCache
}

var _ blobstore.Unwrapper = (*store)(nil)

// New returns bs with the objects opts.Encrypt selects encrypted under
// key. The capabilities of bs stay reachable (blobstore.As): the
// decorator changes no key.
func New(bs blobstore.Blobstore, key Key, opts Options) (blobstore.Blobstore, error) {
	if err := key.validate(); err != nil {
		return nil, err
	}
	master, err := newGCM(key.Material[:])
	if err != nil {
		return nil, err
	}
	if opts.Encrypt == nil {
		opts.Encrypt = DefaultEncrypt
	}
	return &store{bs: bs, id: key.ID, master: master, encrypt: opts.Encrypt}, nil
}

// Unwrap returns the store holding the ciphertext.
func (s *store) Unwrap() blobstore.Blobstore { return s.bs }

func (s *store) seal(key string, r io.Reader) (io.Reader, error) {
	s.headers.drop(key) // this store replaces it: its data key changes
	h, ok, err := newHeader(s.master, s.id)
	if err != nil {
		return nil, err
	}
	return newSealer(r, h, ok), nil
}

func (s *store) Put(ctx context.Context, key string, r io.Reader) error {
	if !s.encrypt(key) {
		return s.bs.Put(ctx, key, r)
	}
	sr, err := s.seal(key, r)
	if err != nil {
		return err
	}
	return s.bs.Put(ctx, key, sr)
}

func (s *store) PutIfAbsent(ctx context.Context, key string, r io.Reader) (string, error) {
	if !s.encrypt(key) {
		return s.bs.PutIfAbsent(ctx, key, r)
	}
	sr, err := s.seal(key, r)
	if err != nil {
		return "", err
	}
	return s.bs.PutIfAbsent(ctx, key, sr)
}

func (s *store) PutIfMatch(ctx context.Context, key, etag string, r io.Reader) (string, error) {
	if !s.encrypt(key) {
		return s.bs.PutIfMatch(ctx, key, etag, r)
	}
	sr, err := s.seal(key, r)
	if err != nil {
		return "", err
	}
	return s.bs.PutIfMatch(ctx, key, etag, sr)
}

// readHeader reads and opens the header at the start of src.
func (s *store) readHeader(src io.Reader, key string) (*objectKey, error) {
	h := make([]byte, HeaderSize)
	n, err := io.ReadFull(src, h)
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return nil, err
	}
	ok, err := openHeader(s.master, s.id, key, h[:n])
	if err == nil {
		s.headers.put(key, ok)
	}
	return ok, err
}

func (s *store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if !s.encrypt(key) {
		return s.bs.Get(ctx, key)
	}
	rc, err := s.bs.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	return s.unseal(rc, key)
}

// unseal returns the plaintext reader of rc, the whole object at key.
func (s *store) unseal(rc io.ReadCloser, key string) (io.ReadCloser, error) {
	src := bufio.NewReaderSize(rc, sealedSize+1)
	ok, err := s.readHeader(src, key)
	if err != nil {
		rc.Close()
		return nil, err
	}
	return newUnsealer(rc, src, ok, key, 0, 0, -1), nil
}

var _ blobstore.InfoGetter = (*store)(nil)

// GetWithInfo is Get with the object's info, its size the plaintext's.
// The ETag is the stored object's, as Stat's is.
func (s *store) GetWithInfo(ctx context.Context, key string) (io.ReadCloser, blobstore.ObjectInfo, error) {
	rc, info, err := blobstore.GetWithInfo(ctx, s.bs, key)
	if err != nil || !s.encrypt(key) {
		return rc, info, err
	}
	if rc, err = s.unseal(rc, key); err != nil {
		return nil, blobstore.ObjectInfo{}, err
	}
	return rc, s.plainInfo(info), nil
}

// GetRange reads the chunks that hold the range, and one byte past the
// last of them so that a full chunk is known to be the last or not. A
// range in chunk 0 is one read from the start of the object; another is
// two: the header, then the chunks.
func (s *store) GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	return s.getRange(ctx, key, offset, length, true)
}

func (s *store) getRange(ctx context.Context, key string, offset, length int64, useCache bool) (io.ReadCloser, error) {
	if !s.encrypt(key) {
		return s.bs.GetRange(ctx, key, offset, length)
	}
	if offset < 0 {
		return s.bs.GetRange(ctx, key, offset, length) // the store's own error
	}
	if offset > maxPlain || length == 0 {
		// Nothing to read, but the key must exist and be ours.
		rc, err := s.bs.GetRange(ctx, key, 0, int64(HeaderSize))
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		if _, err := s.readHeader(rc, key); err != nil {
			return nil, err
		}
		return io.NopCloser(strings.NewReader("")), nil
	}
	first := offset / ChunkSize
	toEnd := length < 0 || length > maxPlain-offset
	cLen := int64(-1)
	if !toEnd {
		lastChunk := (offset + length - 1) / ChunkSize
		cLen = (lastChunk-first+1)*sealedSize + 1
	}
	cOff := int64(HeaderSize) + first*sealedSize
	var ok *objectKey
	var rc io.ReadCloser
	var err error
	if first == 0 {
		if !toEnd {
			cLen += int64(HeaderSize)
		}
		if rc, err = s.bs.GetRange(ctx, key, 0, cLen); err != nil {
			return nil, err
		}
	} else if cached := s.headers.get(key); cached != nil && useCache {
		// One request instead of two. The first chunk is opened here: if
		// the object was replaced since, it fails, and the header is read.
		if rc, err = s.bs.GetRange(ctx, key, cOff, cLen); err != nil {
			return nil, err
		}
		u := s.unsealer(ctx, rc, cached, key, offset, length, toEnd)
		if err := u.open(); errors.Is(err, ErrCorrupt) {
			rc.Close()
			s.headers.drop(key)
			return s.getRange(ctx, key, offset, length, false)
		} else if err != nil {
			rc.Close()
			return nil, err
		}
		return u, nil
	} else {
		hrc, err := s.bs.GetRange(ctx, key, 0, int64(HeaderSize))
		if err != nil {
			return nil, err
		}
		ok, err = s.readHeader(hrc, key)
		hrc.Close()
		if err != nil {
			return nil, err
		}
		if rc, err = s.bs.GetRange(ctx, key, cOff, cLen); err != nil {
			return nil, err
		}
	}
	if first == 0 {
		src := bufio.NewReaderSize(rc, sealedSize+1)
		if ok, err = s.readHeader(src, key); err != nil {
			rc.Close()
			return nil, err
		}
		return s.unsealerOn(ctx, rc, src, ok, key, offset, length, toEnd), nil
	}
	return s.unsealer(ctx, rc, ok, key, offset, length, toEnd), nil
}

// unsealer returns the plaintext of the range at offset, read from rc
// (which starts at the range's first chunk).
func (s *store) unsealer(ctx context.Context, rc io.ReadCloser, ok *objectKey, key string, offset, length int64, toEnd bool) *unsealer {
	return s.unsealerOn(ctx, rc, bufio.NewReaderSize(rc, sealedSize+1), ok, key, offset, length, toEnd)
}

func (s *store) unsealerOn(ctx context.Context, rc io.ReadCloser, src *bufio.Reader, ok *objectKey, key string, offset, length int64, toEnd bool) *unsealer {
	first := offset / ChunkSize
	remain := length
	if toEnd {
		remain = -1
	}
	u := newUnsealer(rc, src, ok, key, uint64(first), int(offset-first*ChunkSize), remain)
	u.verifyEnd = func() error { return s.verifyEnd(ctx, key, ok) }
	return u
}

// verifyEnd checks that the object at key ends where its size says: its
// final chunk authenticates as the last. A range read past the end calls
// it, so that a truncated object is not taken for a shorter one.
func (s *store) verifyEnd(ctx context.Context, key string, ok *objectKey) error {
	info, err := s.bs.Stat(ctx, key)
	if err != nil {
		return err
	}
	plain, valid := PlaintextSize(info.Size)
	if !valid {
		return fmt.Errorf("%w: %q: %d bytes is no encrypted object's size", ErrCorrupt, key, info.Size)
	}
	last := int64(0)
	if plain > 0 {
		last = (plain - 1) / ChunkSize
	}
	rc, err := s.bs.GetRange(ctx, key, int64(HeaderSize)+last*sealedSize, -1)
	if err != nil {
		return err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, sealedSize+1))
	if err != nil {
		return err
	}
	_, err = ok.openChunk(b, key, uint64(last), true)
	return err
}

// plainInfo reports info's plaintext size when key is encrypted. A size
// no encrypted object has is reported as stored: reading it fails.
func (s *store) plainInfo(info blobstore.ObjectInfo) blobstore.ObjectInfo {
	if s.encrypt(info.Key) {
		if n, ok := PlaintextSize(info.Size); ok {
			info.Size = n
		}
	}
	return info
}

func (s *store) Stat(ctx context.Context, key string) (blobstore.ObjectInfo, error) {
	info, err := s.bs.Stat(ctx, key)
	if err != nil {
		return info, err
	}
	return s.plainInfo(info), nil
}

func (s *store) Exists(ctx context.Context, key string) (bool, error) {
	return s.bs.Exists(ctx, key)
}

func (s *store) List(ctx context.Context, prefix string) iter.Seq2[blobstore.ObjectInfo, error] {
	return func(yield func(blobstore.ObjectInfo, error) bool) {
		for info, err := range s.bs.List(ctx, prefix) {
			if err != nil {
				yield(info, err)
				return
			}
			if !yield(s.plainInfo(info), nil) {
				return
			}
		}
	}
}

func (s *store) Delete(ctx context.Context, key string) error {
	s.headers.drop(key)
	return s.bs.Delete(ctx, key)
}
