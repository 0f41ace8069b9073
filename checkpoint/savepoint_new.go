package checkpoint

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tidemark-io/tidemark/savepoint"
)

// ErrSavepointExists is returned (wrapped, together with
// blobstore.ErrPreconditionFailed) by CreateSavepointWith, CopySavepointWith
// and ImportSavepoint when a savepoint of the label exists already and
// the options do not say Replace.
var ErrSavepointExists = errors.New("checkpoint: savepoint exists")

// maxNewLabelLen bounds a new savepoint's label (as checkpoint ids are
// bounded).
const maxNewLabelLen = 200

// ValidateNewLabel reports whether label may name a new savepoint: 1 to
// 200 bytes of A-Z, a-z, 0-9, '.', '_' and '-', not starting with '.'
// (filestore's temporary files do) or '-' (a label is a command-line
// argument). Such a label is a key segment every store and shell takes
// as it is. ValidateLabel, the rule for reading, deleting and copying
// savepoints, is wider (any single key segment, "a b" included), so a
// savepoint made before this rule stays usable. The error wraps
// ErrInvalidLabel.
func ValidateNewLabel(label string) error {
	if err := ValidateLabel(label); err != nil {
		return err
	}
	switch {
	case len(label) > maxNewLabelLen:
		return fmt.Errorf("%w: %q: %d bytes, over the %d-byte limit", ErrInvalidLabel, label, len(label), maxNewLabelLen)
	case strings.HasPrefix(label, ".") || strings.HasPrefix(label, "-"):
		return fmt.Errorf("%w: %q: starts with %q", ErrInvalidLabel, label, label[:1])
	case strings.Trim(label, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") != "":
		return fmt.Errorf("%w: %q: only A-Z, a-z, 0-9, '.', '_' and '-' are allowed", ErrInvalidLabel, label)
	}
	return nil
}

// exists wraps ErrSavepointExists into a taken label's error.
func exists(err error) error {
	if errors.Is(err, savepoint.ErrExists) {
		return fmt.Errorf("%w: %w", ErrSavepointExists, err)
	}
	return err
}
