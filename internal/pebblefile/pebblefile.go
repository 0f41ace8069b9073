// Package pebblefile holds the one rule for which files of a Pebble
// checkpoint never change once written: package state exports it as
// state.Classify, and blobstorage uses it as its default classifier,
// without importing Pebble.
package pebblefile

import (
	"path"
	"path/filepath"
	"strings"
)

// Immutable reports whether the checkpoint file at relPath ('/' or
// OS-separated; only the base name matters) is a Pebble table or blob
// file: digits, then ".sst" or ".blob". Pebble never modifies such a
// file after writing it, so a later checkpoint that still has one can
// share the copy an earlier checkpoint uploaded. Anything else (MANIFEST,
// OPTIONS, WAL, markers) may be rewritten, appended to or recycled.
func Immutable(relPath string) bool {
	base := path.Base(filepath.ToSlash(relPath))
	stem, ok := strings.CutSuffix(base, ".sst")
	if !ok {
		stem, ok = strings.CutSuffix(base, ".blob")
	}
	if !ok || stem == "" {
		return false
	}
	for i := 0; i < len(stem); i++ {
		if stem[i] < '0' || stem[i] > '9' {
			return false
		}
	}
	return true
}
