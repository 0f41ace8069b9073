// Package memstore is an in-memory blobstore.Blobstore for unit tests.
//
// It passes the conformance suite (blobstore/blobstoretest) like every
// other store, so code tested against it behaves the same on a filestore
// or on S3. It keeps every object in memory and is not meant for
// production. Its URL scheme is "mem://" (each Open returns a new, empty
// store).
package memstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tidemark-io/tidemark/blobstore"
)

func init() {
	blobstore.Register("mem", func(context.Context, *url.URL) (blobstore.Blobstore, error) {
		return New(), nil
	})
}

type object struct {
	data    []byte
	etag    string
	modTime time.Time
}

// Store is an in-memory Blobstore. The zero value is not usable; call New.
type Store struct {
	mu      sync.RWMutex
	objects map[string]object
	version uint64
}

var _ blobstore.Blobstore = (*Store)(nil)

// New returns an empty in-memory store.
func New() *Store {
	return &Store{objects: map[string]object{}}
}

// read drains r while honouring ctx, so a cancelled Put fails as the
// contract demands even if r itself never errors.
func read(ctx context.Context, r io.Reader) ([]byte, error) {
	var buf bytes.Buffer
	chunk := make([]byte, 64<<10)
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		n, err := r.Read(chunk)
		buf.Write(chunk[:n])
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// put stores data under key if cond (called under the lock with the
// current object, if any) allows it.
func (s *Store) put(ctx context.Context, op, key string, r io.Reader, cond func(cur object, ok bool) bool) (string, error) {
	if err := blobstore.ValidateKey(key); err != nil {
		return "", fmt.Errorf("memstore: %s: %w", op, err)
	}
	data, err := read(ctx, r)
	if err != nil {
		return "", fmt.Errorf("memstore: %s %q: %w", op, key, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.objects[key]
	if cond != nil && !cond(cur, ok) {
		return "", fmt.Errorf("memstore: %s %q: %w", op, key, blobstore.ErrPreconditionFailed)
	}
	s.version++
	etag := `"` + strconv.FormatUint(s.version, 16) + `"`
	s.objects[key] = object{data: data, etag: etag, modTime: time.Now()}
	return etag, nil
}

// Put implements blobstore.Blobstore.
func (s *Store) Put(ctx context.Context, key string, r io.Reader) error {
	_, err := s.put(ctx, "put", key, r, nil)
	return err
}

// PutIfAbsent implements blobstore.Blobstore.
func (s *Store) PutIfAbsent(ctx context.Context, key string, r io.Reader) (string, error) {
	return s.put(ctx, "put-if-absent", key, r, func(_ object, ok bool) bool { return !ok })
}

// PutIfMatch implements blobstore.Blobstore.
func (s *Store) PutIfMatch(ctx context.Context, key, etag string, r io.Reader) (string, error) {
	return s.put(ctx, "put-if-match", key, r, func(cur object, ok bool) bool { return ok && cur.etag == etag })
}

func (s *Store) lookup(ctx context.Context, op, key string) (object, error) {
	if err := blobstore.ValidateKey(key); err != nil {
		return object{}, fmt.Errorf("memstore: %s: %w", op, err)
	}
	// A real store fails a cancelled request: so must the one tests use.
	if err := ctx.Err(); err != nil {
		return object{}, fmt.Errorf("memstore: %s %q: %w", op, key, err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	o, ok := s.objects[key]
	if !ok {
		return object{}, fmt.Errorf("memstore: %s %q: %w", op, key, blobstore.ErrNotFound)
	}
	return o, nil
}

// Get implements blobstore.Blobstore.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	return s.GetRange(ctx, key, 0, -1)
}

// GetRange implements blobstore.Blobstore.
func (s *Store) GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	o, err := s.lookup(ctx, "get", key)
	if err != nil {
		return nil, err
	}
	if offset < 0 {
		return nil, fmt.Errorf("memstore: get %q: negative offset %d", key, offset)
	}
	// Objects are never mutated in place (a put replaces the slice), so
	// the reader can share it without copying.
	data := o.data[min(offset, int64(len(o.data))):]
	if length >= 0 && length < int64(len(data)) {
		data = data[:length]
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

var _ blobstore.InfoGetter = (*Store)(nil)

// GetWithInfo implements blobstore.InfoGetter: the body and info are of
// one version of the object.
func (s *Store) GetWithInfo(ctx context.Context, key string) (io.ReadCloser, blobstore.ObjectInfo, error) {
	o, err := s.lookup(ctx, "get", key)
	if err != nil {
		return nil, blobstore.ObjectInfo{}, err
	}
	info := blobstore.ObjectInfo{Key: key, Size: int64(len(o.data)), ETag: o.etag, ModTime: o.modTime}
	return io.NopCloser(bytes.NewReader(o.data)), info, nil
}

// Stat implements blobstore.Blobstore.
func (s *Store) Stat(ctx context.Context, key string) (blobstore.ObjectInfo, error) {
	o, err := s.lookup(ctx, "stat", key)
	if err != nil {
		return blobstore.ObjectInfo{}, err
	}
	return blobstore.ObjectInfo{Key: key, Size: int64(len(o.data)), ETag: o.etag, ModTime: o.modTime}, nil
}

// Exists implements blobstore.Blobstore.
func (s *Store) Exists(ctx context.Context, key string) (bool, error) {
	_, err := s.Stat(ctx, key)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, blobstore.ErrNotFound) {
		return false, nil
	}
	return false, err
}

// List implements blobstore.Blobstore. It pages through a sorted snapshot
// of the keys, so it works like the paged stores and is safe against
// concurrent writes (a key put during listing may or may not appear).
func (s *Store) List(ctx context.Context, prefix string) iter.Seq2[blobstore.ObjectInfo, error] {
	return func(yield func(blobstore.ObjectInfo, error) bool) {
		if err := blobstore.ValidatePrefix(prefix); err != nil {
			yield(blobstore.ObjectInfo{}, fmt.Errorf("memstore: list: %w", err))
			return
		}
		if err := ctx.Err(); err != nil {
			yield(blobstore.ObjectInfo{}, fmt.Errorf("memstore: list %q: %w", prefix, err))
			return
		}
		s.mu.RLock()
		var infos []blobstore.ObjectInfo
		for k, o := range s.objects {
			if strings.HasPrefix(k, prefix) {
				infos = append(infos, blobstore.ObjectInfo{Key: k, Size: int64(len(o.data)), ETag: o.etag, ModTime: o.modTime})
			}
		}
		s.mu.RUnlock()
		slices.SortFunc(infos, func(a, b blobstore.ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
		for _, info := range infos {
			if err := ctx.Err(); err != nil {
				yield(blobstore.ObjectInfo{}, fmt.Errorf("memstore: list %q: %w", prefix, err))
				return
			}
			if !yield(info, nil) {
				return
			}
		}
	}
}

// Delete implements blobstore.Blobstore.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := blobstore.ValidateKey(key); err != nil {
		return fmt.Errorf("memstore: delete: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: delete %q: %w", key, err)
	}
	s.mu.Lock()
	delete(s.objects, key)
	s.mu.Unlock()
	return nil
}

var _ blobstore.ConditionalDeleter = (*Store)(nil)

// DeleteIfMatch implements blobstore.ConditionalDeleter.
func (s *Store) DeleteIfMatch(ctx context.Context, key, etag string) error {
	if err := blobstore.ValidateKey(key); err != nil {
		return fmt.Errorf("memstore: delete if match: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: delete if match %q: %w", key, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.objects[key]
	switch {
	case !ok:
		return fmt.Errorf("memstore: delete if match %q: %w", key, blobstore.ErrNotFound)
	case cur.etag != etag:
		return fmt.Errorf("memstore: delete if match %q: %w", key, blobstore.ErrPreconditionFailed)
	}
	delete(s.objects, key)
	return nil
}
