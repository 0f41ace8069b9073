package state

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Pebble's remote object catalog (remote mode) is a file named
// REMOTE-OBJ-CATALOG-<n> that a marker file names:
// marker.remote-obj-catalog.<iteration>.REMOTE-OBJ-CATALOG-<n>. On its
// first write after an open, Pebble starts a new catalog named after the
// marker's next iteration and removes the old one. A checkpoint copies
// the catalog under its own name with a marker at iteration 1, so a
// database restored from a restored database's checkpoint has catalog 2
// at iteration 1: its rotation recreated catalog 2 and removed it
// (pebble v2.1.7). alignCatalogMarker moves such a marker up to the
// catalog's number, so the next name is always a new one.
const (
	catalogMarkerPrefix = "marker.remote-obj-catalog."
	catalogFilePrefix   = "REMOTE-OBJ-CATALOG-"
)

// alignCatalogMarker renames the catalog marker of the database in dir,
// if it has one, so that its iteration is at least the catalog's number.
func alignCatalogMarker(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), catalogMarkerPrefix)
		if !ok {
			continue
		}
		iterText, file, ok := strings.Cut(rest, ".")
		num, isCatalog := strings.CutPrefix(file, catalogFilePrefix)
		iter, err1 := strconv.ParseUint(iterText, 10, 64)
		n, err2 := strconv.ParseUint(num, 10, 64)
		if !ok || !isCatalog || err1 != nil || err2 != nil {
			return fmt.Errorf("%q: %w", e.Name(), ErrUnsupportedFile)
		}
		if iter >= n {
			continue
		}
		aligned := fmt.Sprintf("%s%06d.%s", catalogMarkerPrefix, n, file)
		if err := os.Rename(filepath.Join(dir, e.Name()), filepath.Join(dir, aligned)); err != nil {
			return err
		}
	}
	return nil
}
