package filestore_test

import (
	"path/filepath"
	"testing"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
	"github.com/tidemark-io/tidemark/filestore"
)

func newStore(t *testing.T, dir string) *filestore.Store {
	t.Helper()
	s, err := filestore.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	t.Run("ExistingDir", func(t *testing.T) {
		blobstoretest.Run(t, func(t *testing.T) blobstore.Blobstore {
			return newStore(t, t.TempDir())
		}, blobstoretest.Options{})
	})
	t.Run("DirCreatedOnFirstWrite", func(t *testing.T) {
		blobstoretest.Run(t, func(t *testing.T) blobstore.Blobstore {
			return newStore(t, filepath.Join(t.TempDir(), "not", "yet"))
		}, blobstoretest.Options{})
	})
}
