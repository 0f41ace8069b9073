package blobstore_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tidemark-io/tidemark/blobstore"
)

// TestOpenUnknownSchemeHintsImport: for a Go program, an unknown scheme
// most often means a store package that is not imported; the error says
// so, and does not show a password the URL carries.
func TestOpenUnknownSchemeHintsImport(t *testing.T) {
	for _, raw := range []string{"nosuch://u:secret@b/p", "//u:secret@b/p"} {
		_, err := blobstore.Open(t.Context(), raw)
		if !errors.Is(err, blobstore.ErrInvalidURL) {
			t.Fatalf("%s: %v, want ErrInvalidURL", raw, err)
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: error shows the password: %v", raw, err)
		}
		if strings.HasPrefix(raw, "nosuch") && !strings.Contains(err.Error(), "forgot to import the store package?") {
			t.Errorf("%s: error %q lacks the import hint", raw, err)
		}
	}
}
