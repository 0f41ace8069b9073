package blobstorage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tidemark-io/tidemark/blobstore"
)

// ErrForeignStore is returned (wrapped) by Acquire and GC on a prefix that
// holds data that is not Tidemark's and no identity mark (see the package
// documentation): nothing is written or deleted there.
var ErrForeignStore = errors.New("not a Tidemark store: the prefix holds other data and no _tidemark mark")

// ErrNoStore is returned (wrapped) by CheckStore on a prefix that holds
// nothing at all: no mark, no key of Tidemark's layout. A tool that must
// not create a store (gc) refuses it rather than mark it by taking the
// writer role.
var ErrNoStore = errors.New("no Tidemark store: the prefix holds no _tidemark mark and no checkpoints")

// markRecord is the content of _tidemark.
type markRecord struct {
	Format  int       `json:"format"`
	Created time.Time `json:"created"`
	Writer  string    `json:"writer"`
}

// identity reports whether the store is marked, and, when it is not,
// whether it holds only Tidemark's keys (so that it may be marked). A
// foreign store is ErrForeignStore naming one of its keys. The listing
// stops at the first foreign key.
func (s *Storage) identity(ctx context.Context) (marked bool, err error) {
	ok, err := s.bs.Exists(ctx, keyMark)
	if err != nil {
		return false, fmt.Errorf("check %s: %w", keyMark, err)
	}
	if ok {
		return true, nil
	}
	for o, err := range s.bs.List(ctx, "") {
		if err != nil {
			return false, fmt.Errorf("check the store is Tidemark's: %w", err)
		}
		if KeyClass(o.Key) == "other" {
			return false, fmt.Errorf("%w (found %q): point the store URL at a job's own prefix, or at an empty one", ErrForeignStore, o.Key)
		}
	}
	return false, nil
}

// CheckStore reports whether the prefix holds a Tidemark store, without
// writing anything: nil when it is marked or holds keys of Tidemark's
// layout (a store written before marks existed, or one holding only
// savepoints), ErrNoStore when it holds nothing, ErrForeignStore when the
// first key it lists is not Tidemark's. It lists no further than the first
// key, so it is cheap on a large store; Acquire and GC still check the
// whole prefix for foreign keys before they write or delete.
//
// A job takes the writer role on an empty prefix to create its store;
// tools that only operate on an existing one (gc) call CheckStore first,
// so that a mistyped prefix is an error rather than a new, empty store.
func (s *Storage) CheckStore(ctx context.Context) error {
	ok, err := s.bs.Exists(ctx, keyMark)
	if err != nil {
		return fmt.Errorf("check %s: %w", keyMark, err)
	}
	if ok {
		return nil
	}
	for o, err := range s.bs.List(ctx, "") {
		if err != nil {
			return fmt.Errorf("check the store is Tidemark's: %w", err)
		}
		if KeyClass(o.Key) == "other" {
			return fmt.Errorf("%w (found %q): point the store URL at a job's own prefix", ErrForeignStore, o.Key)
		}
		return nil
	}
	return ErrNoStore
}

// ensureMarked marks the store as Tidemark's if it is not yet, after
// checking that it holds nothing else. Called by Acquire before its first
// write.
func (s *Storage) ensureMarked(ctx context.Context) error {
	marked, err := s.identity(ctx)
	if err != nil || marked {
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
