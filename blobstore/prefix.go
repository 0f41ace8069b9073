package blobstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"strings"
	"time"
)

// WithPrefix returns a Blobstore that stores every key k of its own as
// prefix+"/"+k in bs, and lists only under that prefix, so several jobs
// can share one bucket or directory without seeing each other's keys.
// Keys are validated as keys of the returned store, so no key can reach
// outside the prefix. prefix itself must be a valid key (a trailing '/' is
// dropped); an empty prefix returns bs unchanged.
func WithPrefix(bs Blobstore, prefix string) (Blobstore, error) {
	prefix = strings.TrimSuffix(prefix, "/")
	if prefix == "" {
		return bs, nil
	}
	if err := ValidateKey(prefix); err != nil {
		return nil, fmt.Errorf("blobstore: prefix: %w", err)
	}
	return &prefixed{bs: bs, prefix: prefix + "/"}, nil
}

type prefixed struct {
	bs     Blobstore
	prefix string
}

var (
	_ Blobstore     = (*prefixed)(nil)
	_ Unwrapper     = (*prefixed)(nil)
	_ UploadAborter = (*prefixed)(nil)
)

// Unwrap returns the store the prefix is applied to, so that As finds its
// capabilities (Probe: conditional writes are a property of the endpoint,
// not of a prefix).
func (p *prefixed) Unwrap() Blobstore { return p.bs }

// AbortIncompleteUploads aborts the incomplete uploads under prefix within
// this store's prefix, if the store underneath has any (UploadAborter);
// otherwise there are none to abort. It is implemented here rather than
// reached through Unwrap because its argument is a key prefix.
func (p *prefixed) AbortIncompleteUploads(ctx context.Context, prefix string, olderThan time.Duration) (int, error) {
	if err := ValidatePrefix(prefix); err != nil {
		return 0, err
	}
	a, ok := As[UploadAborter](p.bs)
	if !ok {
		return 0, nil
	}
	return a.AbortIncompleteUploads(ctx, p.prefix+prefix, olderThan)
}

// DeleteIfMatch deletes key within this store's prefix if the store
// underneath can (ConditionalDeleter); otherwise it fails with an error
// wrapping errors.ErrUnsupported. It is implemented here rather than
// reached through Unwrap because its argument is a key.
func (p *prefixed) DeleteIfMatch(ctx context.Context, key, etag string) error {
	k, err := p.key(key)
	if err != nil {
		return err
	}
	c, ok := As[ConditionalDeleter](p.bs)
	if !ok {
		return fmt.Errorf("blobstore: delete if match %q: %w", key, errors.ErrUnsupported)
	}
	return c.DeleteIfMatch(ctx, k, etag)
}

func (p *prefixed) key(k string) (string, error) {
	if err := ValidateKey(k); err != nil {
		return "", err
	}
	full := p.prefix + k
	if len(full) > MaxKeyLen {
		return "", fmt.Errorf("%w: %q is %d bytes with prefix %q, over the %d-byte limit", ErrInvalidKey, k, len(full), p.prefix, MaxKeyLen)
	}
	return full, nil
}

func (p *prefixed) Put(ctx context.Context, key string, r io.Reader) error {
	k, err := p.key(key)
	if err != nil {
		return err
	}
	return p.bs.Put(ctx, k, r)
}

func (p *prefixed) PutIfAbsent(ctx context.Context, key string, r io.Reader) (string, error) {
	k, err := p.key(key)
	if err != nil {
		return "", err
	}
	return p.bs.PutIfAbsent(ctx, k, r)
}

func (p *prefixed) PutIfMatch(ctx context.Context, key, etag string, r io.Reader) (string, error) {
	k, err := p.key(key)
	if err != nil {
		return "", err
	}
	return p.bs.PutIfMatch(ctx, k, etag, r)
}

func (p *prefixed) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	k, err := p.key(key)
	if err != nil {
		return nil, err
	}
	return p.bs.Get(ctx, k)
}

var _ InfoGetter = (*prefixed)(nil)

// GetWithInfo reads the prefixed key; the info names key, as Stat's does.
func (p *prefixed) GetWithInfo(ctx context.Context, key string) (io.ReadCloser, ObjectInfo, error) {
	k, err := p.key(key)
	if err != nil {
		return nil, ObjectInfo{}, err
	}
	rc, info, err := GetWithInfo(ctx, p.bs, k)
	if err != nil {
		return nil, ObjectInfo{}, err
	}
	info.Key = key
	return rc, info, nil
}

func (p *prefixed) GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	k, err := p.key(key)
	if err != nil {
		return nil, err
	}
	return p.bs.GetRange(ctx, k, offset, length)
}

func (p *prefixed) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	k, err := p.key(key)
	if err != nil {
		return ObjectInfo{}, err
	}
	info, err := p.bs.Stat(ctx, k)
	info.Key = key
	return info, err
}

func (p *prefixed) Exists(ctx context.Context, key string) (bool, error) {
	k, err := p.key(key)
	if err != nil {
		return false, err
	}
	return p.bs.Exists(ctx, k)
}

func (p *prefixed) List(ctx context.Context, prefix string) iter.Seq2[ObjectInfo, error] {
	return func(yield func(ObjectInfo, error) bool) {
		if err := ValidatePrefix(prefix); err != nil {
			yield(ObjectInfo{}, err)
			return
		}
		for info, err := range p.bs.List(ctx, p.prefix+prefix) {
			if err != nil {
				yield(ObjectInfo{}, err)
				return
			}
			info.Key = strings.TrimPrefix(info.Key, p.prefix)
			if !yield(info, nil) {
				return
			}
		}
	}
}

func (p *prefixed) Delete(ctx context.Context, key string) error {
	k, err := p.key(key)
	if err != nil {
		return err
	}
	return p.bs.Delete(ctx, k)
}
