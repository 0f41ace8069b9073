package storagetest_test

import (
	"testing"

	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/checkpoint/storagetest"
)

func TestFileStorage(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) checkpoint.Storage {
		return checkpoint.NewFileStorage(t.TempDir())
	})
}
