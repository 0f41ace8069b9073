package checkpoint

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/tidemark-io/tidemark/blobstore"
)

// Local names of a Storage's directory.
const (
	stateExt   = ".state"
	tempMarker = ".tmp-"
)

// StateDirName returns the name of checkpoint id's state directory in a
// Storage's local directory: "<id>.state".
func StateDirName(id string) string { return id + stateExt }

// TempPattern returns an os.CreateTemp / os.MkdirTemp pattern for a
// temporary sibling of name in a Storage's local directory. Such names
// start with '.' and contain ".tmp-", which is how SweepOrphans recognises
// the leftovers of a crash.
func TempPattern(name string) string { return "." + name + tempMarker + "*" }

// ValidatePath checks a path inside a checkpoint's state: a state
// directory, or a file's path relative to its state directory. It must be
// relative and '/'-separated, and each segment a valid key segment (no
// "", ".", "..", backslash or control character), so that it means the
// same on every OS, in every store and in every archive.
func ValidatePath(p string) error {
	if strings.Contains(p, `\`) {
		return fmt.Errorf("path %q: %w: contains a backslash", p, blobstore.ErrInvalidKey)
	}
	if err := blobstore.ValidateKey(p); err != nil {
		return fmt.Errorf("path %q is not a relative slash-separated path: %w", p, err)
	}
	return nil
}

// ValidateStateDirs checks the state directories of a record — the one
// rule every Storage's Save, ArchiveCheckpoint, ExtractCheckpoint and every
// record decoder apply, so that whatever one accepts the others accept:
//
//   - an owner is one key segment (it names blob keys and archive paths);
//   - a state directory is a valid path (ValidatePath);
//   - no two owners' state directories are the same or nested: each file
//     belongs to exactly one owner.
func ValidateStateDirs(dirs map[string]string) error {
	owners := slices.Sorted(maps.Keys(dirs))
	for _, owner := range owners {
		rel := dirs[owner]
		if strings.ContainsAny(owner, `/\`) {
			return fmt.Errorf("state owner %q: %w: not a single key segment", owner, blobstore.ErrInvalidKey)
		}
		if err := blobstore.ValidateKey(owner); err != nil {
			return fmt.Errorf("state owner %q: %w", owner, err)
		}
		if err := ValidatePath(rel); err != nil {
			return fmt.Errorf("state dir of owner %q: %w", owner, err)
		}
	}
	// Sorted with '/' below every other byte, a directory is followed by
	// those nested in it: an overlap is always between neighbours, so
	// a hostile record of many owners costs n log n, not n².
	byDir := slices.Clone(owners)
	slices.SortStableFunc(byDir, func(a, b string) int { return compareDirs(dirs[a], dirs[b]) })
	for i := 1; i < len(byDir); i++ {
		a, b := byDir[i-1], byDir[i]
		da, db := dirs[a], dirs[b]
		if da == db || strings.HasPrefix(db, da+"/") {
			if b < a {
				a, b, da, db = b, a, db, da
			}
			return fmt.Errorf("state dirs %q (owner %q) and %q (owner %q) overlap: each file must belong to one owner", da, a, db, b)
		}
	}
	return nil
}

// compareDirs orders paths byte-wise, except that '/' sorts first.
func compareDirs(a, b string) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		return len(a) - len(b)
	}
	ca, cb := int(a[i]), int(b[i])
	if ca == '/' {
		ca = -1
	}
	if cb == '/' {
		cb = -1
	}
	return ca - cb
}
