package remotestore

import (
	"context"
	"fmt"

	"github.com/cockroachdb/pebble/v2/objstorage/remote"
)

// ReadObjectOfSize is ReadObject for a caller that already knows the
// object's size (Pebble's MANIFEST records the size of every table): it
// sends no Stat. Opening a table is then one request fewer: one of the
// several a cold point read on a table not yet open costs (the Stat, the
// reads of its footer and index blocks, the data block), and the only
// one of a read on a table whose blocks are cached but whose reader was
// evicted from Pebble's file cache.
//
// The reader's guarantees are ReadObject's for an object of that size: a
// missing object fails the first ReadAt (wrapping blobstore.ErrNotFound),
// and one shorter than size fails the read that passes its end, after a
// Stat shows the difference; no read returns fewer bytes than asked.
func (s *Storage) ReadObjectOfSize(_ context.Context, name string, size int64) (remote.ObjectReader, error) {
	key, err := s.Key(name)
	if err != nil {
		return nil, err
	}
	if err := s.checkOpen(); err != nil {
		return nil, fmt.Errorf("remotestore: read %q: %w", key, err)
	}
	if size < 0 {
		return nil, fmt.Errorf("remotestore: read %q: negative size %d", key, size)
	}
	return &objectReader{s: s, key: key, size: size}, nil
}
