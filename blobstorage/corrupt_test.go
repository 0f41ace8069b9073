package blobstorage

import (
	"errors"
	"fmt"
	"testing"

	"github.com/tidemark-io/tidemark/archive"
)

// TestErrCorruptMatchesArchive: store damage still matches archive.ErrCorrupt
// for old callers, and archive damage is not store damage.
func TestErrCorruptMatchesArchive(t *testing.T) {
	store := fmt.Errorf("read: %w: part p: bad json", ErrCorrupt)
	if !errors.Is(store, ErrCorrupt) || !errors.Is(store, archive.ErrCorrupt) {
		t.Errorf("%v: want both ErrCorrupt and archive.ErrCorrupt", store)
	}
	arch := fmt.Errorf("extract: %w: entry x", archive.ErrCorrupt)
	if errors.Is(arch, ErrCorrupt) {
		t.Errorf("%v matches blobstorage.ErrCorrupt; want archive.ErrCorrupt only", arch)
	}
	if got := damageReason(store); got != "read: blobstorage: corrupt: part p: bad json" {
		t.Errorf("damageReason(%v) = %q", store, got)
	}
	if got := damageReason(fmt.Errorf("%w: part p", ErrCorrupt)); got != "part p" {
		t.Errorf("damageReason = %q, want %q", got, "part p")
	}
}
