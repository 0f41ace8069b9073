package checkpoint_test

import (
	"strings"
	"testing"

	"github.com/tidemark-io/tidemark/checkpoint"
)

func TestNewFileBlobstoreHoldsSavepoints(t *testing.T) {
	bs, err := checkpoint.NewFileBlobstore(t.TempDir() + "/not-yet")
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := bs.Put(ctx, checkpoint.SavepointKey("a"), strings.NewReader("archive")); err != nil {
		t.Fatal(err)
	}
	labels, err := checkpoint.ListSavepoints(ctx, bs)
	if err != nil || len(labels) != 1 || labels[0] != "a" {
		t.Fatalf("ListSavepoints = %q, %v; want [a]", labels, err)
	}
	if _, err := checkpoint.NewFileBlobstore(""); err == nil {
		t.Fatal("NewFileBlobstore(\"\") succeeded")
	}
}
