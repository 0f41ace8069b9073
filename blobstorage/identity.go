package blobstorage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/savepoint"
)

// ErrForeignStore is returned (wrapped) by Acquire, CheckStore and GC on
// a prefix that is not a Tidemark store (see the package documentation,
// "Store identity"): nothing is written or deleted there.
var ErrForeignStore = errors.New("not a Tidemark store: the prefix holds other data and no _tidemark mark")

// ErrNoStore is returned (wrapped) by CheckStore on a prefix that holds
// nothing at all. A tool that must not create a store (gc) refuses it
// rather than mark it by taking the writer role.
var ErrNoStore = errors.New("no Tidemark store: the prefix holds no _tidemark mark and no checkpoints")

// markRecord is the content of _tidemark.
type markRecord struct {
	Format  int       `json:"format"`
	Created time.Time `json:"created"`
	Writer  string    `json:"writer"`
}

// storeIdentity is what identity found.
type storeIdentity int

const (
	storeMarked  storeIdentity = iota + 1 // holds _tidemark
	storeEmpty                            // holds nothing
	storeAdopted                          // unmarked, but Tidemark's by its grammar
)

// identity tells a Tidemark store from anything else, writing nothing.
// A marked store is Tidemark's. An unmarked one (written before marks
// existed) is Tidemark's only when every key parses under the layout
// grammar (parseKey) and at least one record or savepoint is valid; an
// empty one is storeEmpty. Anything else is ErrForeignStore naming why.
func (s *Storage) identity(ctx context.Context) (storeIdentity, error) {
	ok, err := s.bs.Exists(ctx, keyMark)
	if err != nil {
		return 0, fmt.Errorf("check %s: %w", keyMark, err)
	}
	if ok {
		return storeMarked, nil
	}
	var records, savepoints []string
	n := 0
	for o, err := range s.bs.List(ctx, "") {
		if err != nil {
			return 0, fmt.Errorf("check the store is Tidemark's: %w", err)
		}
		p, ok := parseKey(o.Key, s.opts.Classify)
		if !ok {
			return 0, fmt.Errorf("%w (found %q, which is not a key of Tidemark's layout): point the store URL at a job's own prefix, or at an empty one", ErrForeignStore, o.Key)
		}
		if p.kind != kindProbe { // a writer probing an empty prefix, about to mark it
			n++
		}
		switch p.kind {
		case kindRecord:
			records = append(records, p.id)
		case kindSavepoint:
			savepoints = append(savepoints, o.Key)
		}
	}
	if n == 0 {
		return storeEmpty, nil
	}
	for _, id := range records {
		if _, err := s.readRecord(ctx, id); err == nil {
			return storeAdopted, nil
		} else if ctx.Err() != nil {
			return 0, err
		}
	}
	for _, key := range savepoints {
		if s.validSavepoint(ctx, key) {
			return storeAdopted, nil
		} else if ctx.Err() != nil {
			return 0, ctx.Err()
		}
	}
	return 0, fmt.Errorf("%w (no _tidemark mark and no valid checkpoint record or savepoint among its %d keys)", ErrForeignStore, n)
}

// validSavepoint reports whether key names a savepoint whose manifest
// reads, in either format (package savepoint reads only the manifest
// and takes no lock).
func (s *Storage) validSavepoint(ctx context.Context, key string) bool {
	label, ok := strings.CutPrefix(key, checkpoint.SavepointPrefix)
	if !ok {
		return false
	}
	_, _, err := savepoint.ReadManifest(ctx, s.bs, label, savepoint.Options{})
	return err == nil
}

// CheckStore reports, writing nothing, whether the prefix holds a Tidemark
// store: nil when it is marked or Tidemark's by its grammar (see
// identity), ErrNoStore when it holds nothing, ErrForeignStore otherwise.
// A marked store costs one request; an unmarked one a full listing.
//
// A job takes the writer role on an empty prefix to create its store;
// tools that only operate on an existing one (gc, savepoint rm) call
// CheckStore first, so that a mistyped prefix is an error rather than a
// new, empty store, and a user's folder is never touched.
func (s *Storage) CheckStore(ctx context.Context) error {
	id, err := s.identity(ctx)
	if err != nil {
		return err
	}
	if id == storeEmpty {
		return ErrNoStore
	}
	return nil
}

// ensureMarked marks the store as Tidemark's if it is not yet: an empty
// prefix (a new store) or one Tidemark's by its grammar. Called by
// Acquire before its first write.
func (s *Storage) ensureMarked(ctx context.Context) error {
	id, err := s.identity(ctx)
	if err != nil || id == storeMarked {
		return err
	}
	body := encodeJSON(markRecord{Format: 1, Created: time.Now().UTC(), Writer: s.opts.WriterName})
	_, err = s.bs.PutIfAbsent(ctx, keyMark, bytes.NewReader(body))
	if errors.Is(err, blobstore.ErrPreconditionFailed) {
		return nil // another writer marked it first
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", keyMark, err)
	}
	return nil
}
