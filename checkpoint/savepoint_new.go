package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/tidemark-io/tidemark/savepoint"
)

// ErrSavepointExists is returned (wrapped, together with
// blobstore.ErrPreconditionFailed) by CreateNewSavepoint and
// CopyNewSavepoint when a savepoint of the label exists already.
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

// CreateNewSavepoint is CreateSavepoint that never replaces a savepoint:
// its manifest is written with PutIfAbsent, so if a savepoint of label
// exists (or another creator wins a race for it) no savepoint of bs
// changes and the error wraps ErrSavepointExists. The label must pass
// ValidateNewLabel.
func CreateNewSavepoint(ctx context.Context, src Storage, bs Blobstore, label string) (string, error) {
	if err := ValidateNewLabel(label); err != nil {
		return "", fmt.Errorf("checkpoint: create savepoint: %w", err)
	}
	id, _, err := createSavepoint(ctx, src, bs, label, savepoint.Options{})
	return id, err
}

// CopyNewSavepoint is CopySavepoint that never replaces a savepoint in
// dst: the manifest is written with PutIfAbsent, so if dst holds a
// savepoint of label no savepoint of dst changes and the error wraps
// ErrSavepointExists.
func CopyNewSavepoint(ctx context.Context, src, dst Blobstore, label string) error {
	if err := ValidateLabel(label); err != nil {
		return fmt.Errorf("checkpoint: copy savepoint: %w", err)
	}
	return copySavepoint(ctx, src, dst, label, savepoint.Options{})
}

// exists wraps ErrSavepointExists into a taken label's error.
func exists(err error) error {
	if errors.Is(err, savepoint.ErrExists) {
		return fmt.Errorf("%w: %w", ErrSavepointExists, err)
	}
	return err
}
