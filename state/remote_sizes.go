package state

import (
	"context"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/objstorage/remote"
)

// learnSizes records the size of every physical remote table db's
// MANIFEST lists, so that opening one for reading sends no Stat (see
// remotestore.Storage.ReadObjectOfSize): after a restore every table is
// opened cold, and Pebble's file cache, shared by the owners and bounded
// by Options.MaxOpenFiles, reopens tables of a large state over and over.
// Tables created later by this open, and virtual tables (whose size is
// their share of the object), are not recorded and are Stat'ed as
// before.
func (r *ownerRemote) learnSizes(db *pebble.DB) error {
	levels, err := db.SSTables()
	if err != nil {
		return err
	}
	physical := make(map[uint64]int64)
	for _, level := range levels {
		for _, t := range level {
			if t.BackingType == pebble.BackingTypeShared && !t.Virtual {
				physical[uint64(t.BackingSSTNum)] = int64(t.Size)
			}
		}
	}
	sizes := make(map[string]int64, len(physical))
	provider := db.ObjProvider()
	for _, meta := range provider.List() {
		size, ok := physical[uint64(meta.DiskFileNum)]
		if !ok || !meta.IsRemote() {
			continue
		}
		if key, ok := r.objectKey(meta.Remote.Locator, provider.Path(meta)); ok {
			sizes[key] = size
		}
	}
	r.mu.Lock()
	r.sizes = sizes
	r.mu.Unlock()
	return nil
}

// size returns the size learnSizes recorded for object name of locator
// loc.
func (r *ownerRemote) size(loc remote.Locator, name string) (int64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, ok := r.sizes[r.prefix(loc)+"/"+name]
	return n, ok
}

// ReadObject opens object name without a Stat when its size is known.
func (s *lineageStorage) ReadObject(ctx context.Context, name string) (remote.ObjectReader, int64, error) {
	if size, ok := s.owner.size(s.loc, name); ok {
		rd, err := s.Storage.ReadObjectOfSize(ctx, name, size)
		return rd, size, err
	}
	return s.Storage.ReadObject(ctx, name)
}
