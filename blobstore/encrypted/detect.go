package encrypted

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/tidemark-io/tidemark/blobstore"
)

// ErrNoKey is wrapped by the error of a read, through Detect, of an
// object that is encrypted when no key is configured; the message names
// the key id the object needs.
var ErrNoKey = errors.New("encrypted: object is encrypted and no key is configured")

type detector struct {
	blobstore.Blobstore
	encrypt func(string) bool
}

var _ blobstore.Unwrapper = (*detector)(nil)

// Detect returns bs for a caller with no key: reads of the objects
// opts.Encrypt selects that start with an encryption header fail with
// ErrNoKey naming the key id, instead of yielding ciphertext. It checks
// reads from offset 0 only (Get, GetRange at 0), which costs no request:
// the first bytes are read ahead. Sizes (Stat, List) are not checked.
func Detect(bs blobstore.Blobstore, opts Options) blobstore.Blobstore {
	if opts.Encrypt == nil {
		opts.Encrypt = DefaultEncrypt
	}
	return &detector{Blobstore: bs, encrypt: opts.Encrypt}
}

// Unwrap returns the store underneath.
func (d *detector) Unwrap() blobstore.Blobstore { return d.Blobstore }

func (d *detector) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	rc, err := d.Blobstore.Get(ctx, key)
	if err != nil || !d.encrypt(key) {
		return rc, err
	}
	return refuseEncrypted(rc, key)
}

var _ blobstore.InfoGetter = (*detector)(nil)

// GetWithInfo is Get with the object's info, refusing an encrypted object.
func (d *detector) GetWithInfo(ctx context.Context, key string) (io.ReadCloser, blobstore.ObjectInfo, error) {
	rc, info, err := blobstore.GetWithInfo(ctx, d.Blobstore, key)
	if err != nil || !d.encrypt(key) {
		return rc, info, err
	}
	if rc, err = refuseEncrypted(rc, key); err != nil {
		return nil, blobstore.ObjectInfo{}, err
	}
	return rc, info, nil
}

func (d *detector) GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	rc, err := d.Blobstore.GetRange(ctx, key, offset, length)
	if err != nil || offset != 0 || !d.encrypt(key) {
		return rc, err
	}
	return refuseEncrypted(rc, key)
}

// refuseEncrypted reads the first bytes of rc ahead: a header is
// ErrNoKey, anything else is returned, those bytes first.
func refuseEncrypted(rc io.ReadCloser, key string) (io.ReadCloser, error) {
	head := make([]byte, HeaderSize)
	n, err := io.ReadFull(rc, head)
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		rc.Close()
		return nil, err
	}
	head = head[:n]
	switch {
	case isHeader(head) && n >= offPrefix:
		rc.Close()
		return nil, fmt.Errorf("%w: %q is encrypted under key id %q", ErrNoKey, key, headerKeyID(head))
	case isHeader(head):
		rc.Close() // a short range: the key id is past it
		return nil, fmt.Errorf("%w: %q is encrypted", ErrNoKey, key)
	}
	return readAhead{Reader: io.MultiReader(bytes.NewReader(head), rc), Closer: rc}, nil
}

type readAhead struct {
	io.Reader
	io.Closer
}
