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

// ValidateStateDirs checks the state directories of a record — the one
// rule every Storage's Save, ArchiveCheckpoint, ExtractCheckpoint and every
// record decoder apply, so that whatever one accepts the others accept:
//
//   - an owner is one key segment (it names blob keys and archive paths);
//   - a state directory is a relative, '/'-separated path whose segments
//     are valid key segments (no "", ".", "..", backslash or control
//     character), so it means the same on every OS and in every store;
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
		if strings.Contains(rel, `\`) {
			return fmt.Errorf("state dir %q of owner %q: %w: contains a backslash", rel, owner, blobstore.ErrInvalidKey)
		}
		if err := blobstore.ValidateKey(rel); err != nil {
			return fmt.Errorf("state dir %q of owner %q is not a relative slash-separated path: %w", rel, owner, err)
		}
	}
	for i, a := range owners {
		for _, b := range owners[i+1:] {
			da, db := dirs[a], dirs[b]
			if da == db || strings.HasPrefix(db, da+"/") || strings.HasPrefix(da, db+"/") {
				return fmt.Errorf("state dirs %q (owner %q) and %q (owner %q) overlap: each file must belong to one owner", da, a, db, b)
			}
		}
	}
	return nil
}
