package checkpoint

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
	"github.com/tidemark-io/tidemark/blobstore/memstore"
	"github.com/tidemark-io/tidemark/savepoint"
)

func TestValidateNewLabel(t *testing.T) {
	for _, c := range []struct {
		label string
		ok    bool
	}{
		{"nightly", true}, {"v1.2-final_3", true}, {"before-upgrade", true}, {strings.Repeat("l", 200), true},
		{"a b", false}, {"a\\b", false}, {".hidden", false}, {"-rf", false}, {"ü", false}, {"a:b", false},
		{"a*b", false}, {strings.Repeat("l", 201), false}, {"", false}, {"a/b", false}, {"..", false},
	} {
		err := ValidateNewLabel(c.label)
		if c.ok != (err == nil) {
			t.Errorf("ValidateNewLabel(%q) = %v", c.label, err)
		}
		if !c.ok && !errors.Is(err, ErrInvalidLabel) {
			t.Errorf("ValidateNewLabel(%q) = %v, want ErrInvalidLabel", c.label, err)
		}
	}
	// The reading rule stays wider: a savepoint made before keeps working.
	if err := ValidateLabel("a b"); err != nil {
		t.Errorf("ValidateLabel(%q) = %v", "a b", err)
	}
}

// readAll returns the object under key.
func readAll(t *testing.T, bs Blobstore, key string) []byte {
	t.Helper()
	return blobstoretest.Get(t, bs, key)
}

// TestCreateSavepointWithoutReplaceNeverReplaces: of racing creators of
// one label exactly one wins, the others fail with ErrSavepointExists, and the
// savepoint left is the winner's, whole; a later create with the label
// changes nothing. CreateSavepoint keeps replacing.
func TestCreateSavepointWithoutReplaceNeverReplaces(t *testing.T) {
	for name, newStore := range stores(t) {
		t.Run(name, func(t *testing.T) {
			src, bs := sourceStorage(t), newStore()
			const n = 4
			var wg sync.WaitGroup
			errs := make([]error, n)
			for i := range n {
				wg.Go(func() { _, _, errs[i] = CreateSavepointWith(ctx, src, bs, "v1", savepoint.Options{}) })
			}
			wg.Wait()
			won := 0
			for _, err := range errs {
				switch {
				case err == nil:
					won++
				case !errors.Is(err, ErrSavepointExists) || !errors.Is(err, blobstore.ErrPreconditionFailed):
					t.Errorf("loser: %v, want ErrSavepointExists", err)
				}
			}
			if won != 1 {
				t.Fatalf("%d creators won, want 1", won)
			}
			before := readAll(t, bs, SavepointKey("v1"))
			// Another completed checkpoint: a replacing create would write
			// a different archive.
			mustSave(t, src, record(NewID(4), StatusCompleted))
			if _, _, err := CreateSavepointWith(ctx, src, bs, "v1", savepoint.Options{}); !errors.Is(err, ErrSavepointExists) {
				t.Fatalf("second create: %v, want ErrSavepointExists", err)
			}
			if after := readAll(t, bs, SavepointKey("v1")); !bytes.Equal(before, after) {
				t.Fatal("a refused create changed the savepoint")
			}
			dst := NewFileStorage(t.TempDir())
			if id, err := RestoreSavepoint(ctx, dst, bs, "v1"); err != nil || id != NewID(2) {
				t.Fatalf("restore: %q, %v; want checkpoint %s", id, err, NewID(2))
			}
			if id, err := CreateSavepoint(ctx, src, bs, "v1"); err != nil || id != NewID(4) {
				t.Fatalf("CreateSavepoint (replacing): %q, %v", id, err)
			}
			if _, _, err := CreateSavepointWith(ctx, src, bs, "a b", savepoint.Options{}); !errors.Is(err, ErrInvalidLabel) {
				t.Errorf("CreateSavepointWith(%q) without Replace: %v, want ErrInvalidLabel", "a b", err)
			}
			if _, _, err := CreateSavepointWith(ctx, src, bs, "a b", savepoint.Options{Replace: true}); err != nil {
				t.Errorf("CreateSavepointWith(%q, Replace): %v, want the wider ValidateLabel", "a b", err)
			}
		})
	}
}

// TestCopySavepointWithoutReplaceNeverReplaces: copying onto a label dst
// holds fails with ErrSavepointExists and leaves dst's savepoint as it was.
func TestCopySavepointWithoutReplaceNeverReplaces(t *testing.T) {
	for name, newStore := range stores(t) {
		t.Run(name, func(t *testing.T) {
			src, from, dst := sourceStorage(t), memstore.New(), newStore()
			if _, err := CreateSavepoint(ctx, src, from, "v1"); err != nil {
				t.Fatal(err)
			}
			if err := dst.Put(ctx, SavepointKey("v1"), strings.NewReader("theirs")); err != nil {
				t.Fatal(err)
			}
			if _, err := CopySavepointWith(ctx, from, dst, "v1", savepoint.Options{}); !errors.Is(err, ErrSavepointExists) {
				t.Fatalf("copy onto an existing savepoint: %v, want ErrSavepointExists", err)
			}
			if got := readAll(t, dst, SavepointKey("v1")); string(got) != "theirs" {
				t.Fatalf("dst savepoint is %d bytes, want the original", len(got))
			}
			if _, err := CopySavepointWith(ctx, from, dst, "v2", savepoint.Options{}); !errors.Is(err, ErrBlobNotFound) {
				t.Fatalf("copy of a missing savepoint: %v", err)
			}
			if err := dst.Delete(ctx, SavepointKey("v1")); err != nil {
				t.Fatal(err)
			}
			st, err := CopySavepointWith(ctx, from, dst, "v1", savepoint.Options{})
			if err != nil {
				t.Fatalf("copy to a free label: %v", err)
			}
			if st.Files == 0 || st.Uploaded == 0 {
				t.Errorf("copy to an empty store: stats %+v, want files uploaded", st)
			}
			if !bytes.Equal(readAll(t, dst, SavepointKey("v1")), readAll(t, from, SavepointKey("v1"))) {
				t.Fatal("copy differs")
			}
		})
	}
}
