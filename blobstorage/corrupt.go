package blobstorage

import (
	"errors"
	"strings"

	"github.com/tidemark-io/tidemark/archive"
)

// ErrCorrupt is wrapped by every error about damage found in the store: a
// record, pointer or part document that does not decode or names another
// checkpoint, and an object whose size or digest differs from its record.
// Damage inside an archive wraps archive.ErrCorrupt instead.
//
// For compatibility, errors.Is(err, archive.ErrCorrupt) also holds for
// ErrCorrupt. That match is deprecated: test ErrCorrupt.
var ErrCorrupt error = corruptError{}

// corruptError is ErrCorrupt's type; a struct so that it can carry Is.
type corruptError struct{}

func (corruptError) Error() string { return "blobstorage: corrupt" }

// Is makes ErrCorrupt match archive.ErrCorrupt, which it replaced.
func (corruptError) Is(target error) bool { return target == archive.ErrCorrupt }

// damaged reports whether err is damage of the store or of an archive.
func damaged(err error) bool {
	return errors.Is(err, ErrCorrupt) || errors.Is(err, archive.ErrCorrupt)
}

// damageReason is err's message without the sentinel it starts with.
func damageReason(err error) string {
	s := err.Error()
	for _, p := range []string{ErrCorrupt.Error() + ": ", archive.ErrCorrupt.Error() + ": "} {
		s = strings.TrimPrefix(s, p)
	}
	return s
}
