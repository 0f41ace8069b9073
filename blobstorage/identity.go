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
