package checkpoint

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tidemark-io/tidemark/blobstore"
)

// Checkpoint ids.
//
// Storage implementations compare ids as strings to decide which
// checkpoint is newer (the latest-completed pointer never moves
// backwards), so ids must sort in creation order. NewID produces such ids
// from a sequence number: "ckpt-" followed by the number zero-padded to 20
// digits, the width of the largest uint64, so byte order is numeric order.
// An engine derives the next id from the latest checkpoint of any status
// (Storage.Load, or Decision.Latest after recovery) with NextID, so an id
// whose prepared checkpoint was abandoned is never reused for another
// sink transaction.

// idPrefix starts every id NewID makes.
const idPrefix = "ckpt-"

// idDigits is the width of the zero-padded sequence number: enough for any
// uint64, so ids never outgrow their width and stop sorting.
const idDigits = 20

// maxIDLen bounds an id so that "<id>.state" and "<id>.json" stay well
// inside filesystem name limits.
const maxIDLen = 200

// NewID returns the checkpoint id for sequence number seq, for example
// NewID(7) == "ckpt-00000000000000000007". Ids made by NewID sort (as
// strings) in the order of their sequence numbers.
func NewID(seq uint64) string {
	return fmt.Sprintf("%s%0*d", idPrefix, idDigits, seq)
}

// ParseID returns the sequence number of an id made by NewID.
func ParseID(id string) (uint64, error) {
	digits, ok := strings.CutPrefix(id, idPrefix)
	if !ok || len(digits) != idDigits {
		return 0, fmt.Errorf("%w: %q is not of the form %s<%d digits>", ErrInvalidID, id, idPrefix, idDigits)
	}
	if strings.Trim(digits, "0123456789") != "" {
		return 0, fmt.Errorf("%w: %q is not of the form %s<%d digits>", ErrInvalidID, id, idPrefix, idDigits)
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	if err != nil {
		// 20 digits, so the only error left is the range.
		return 0, fmt.Errorf("%w: %q is past the last id, %s", ErrInvalidID, id, NewID(^uint64(0)))
	}
	return n, nil
}

// NextID returns the id that follows prev: NewID(1) when prev is empty (no
// checkpoint yet), otherwise NewID(ParseID(prev)+1).
func NextID(prev string) (string, error) {
	if prev == "" {
		return NewID(1), nil
	}
	n, err := ParseID(prev)
	if err != nil {
		return "", err
	}
	if n == ^uint64(0) {
		return "", fmt.Errorf("%w: %q is the last id", ErrInvalidID, prev)
	}
	return NewID(n + 1), nil
}

// reservedIDs would collide with FileStorage's pointer files.
var reservedIDs = map[string]bool{"latest": true, "latest-completed": true}

// ValidateID reports whether id can name a checkpoint: non-empty, at most
// 200 bytes, a single blobstore key segment (valid UTF-8, no '/', no
// control characters, not "." or ".."), no '\\', not starting with '.'
// (temporary files do) and not "latest" or "latest-completed" (pointer
// names). The error wraps ErrInvalidID. Ids need not come from NewID, but
// only ids that sort in creation order keep the pointers right.
func ValidateID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: empty", ErrInvalidID)
	case len(id) > maxIDLen:
		return fmt.Errorf("%w: %d bytes, over the %d-byte limit", ErrInvalidID, len(id), maxIDLen)
	case strings.ContainsAny(id, `/\`):
		return fmt.Errorf("%w: %q contains a path separator", ErrInvalidID, id)
	case strings.HasPrefix(id, "."):
		return fmt.Errorf("%w: %q starts with '.'", ErrInvalidID, id)
	case reservedIDs[id]:
		return fmt.Errorf("%w: %q is reserved", ErrInvalidID, id)
	}
	if err := blobstore.ValidateKey(id); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidID, err)
	}
	return nil
}
