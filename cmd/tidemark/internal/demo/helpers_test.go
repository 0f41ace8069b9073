package demo

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
)

func readAllClose(rc io.ReadCloser) ([]byte, error) {
	defer rc.Close()
	return io.ReadAll(rc)
}

// committedIDs returns the ids of the commits of Run's output in bs that
// keep accepts, failing the test when there is none.
func committedIDs(t *testing.T, bs blobstore.Blobstore, keep func(string) bool) []string {
	t.Helper()
	var ids []string
	for info, err := range bs.List(t.Context(), CommitPrefix) {
		if err != nil {
			t.Fatal(err)
		}
		if id := strings.TrimPrefix(info.Key, CommitPrefix); keep(id) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		t.Fatal("no such committed transaction: the test proves nothing")
	}
	return ids
}

func all(string) bool { return true }

// copyCommit commits, in to, the transaction committed as id in from
// again as checkpoint as: its commit names the same records (copied into
// to when it is another store).
func copyCommit(t *testing.T, from, to blobstore.Blobstore, id, as string) {
	t.Helper()
	ctx := t.Context()
	header, err := readAllClose(must(from.Get(ctx, CommitPrefix+id)))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(header))
	if len(f) != 4 || f[1] != id {
		t.Fatalf("commit of %s: header %q", id, header)
	}
	if from != to {
		body, err := readAllClose(must(from.Get(ctx, f[2])))
		if err != nil {
			t.Fatal(err)
		}
		if err := to.Put(ctx, f[2], bytes.NewReader(body)); err != nil {
			t.Fatal(err)
		}
	}
	f[1] = as
	if err := to.Put(ctx, CommitPrefix+as, strings.NewReader(strings.Join(f, " ")+"\n")); err != nil {
		t.Fatal(err)
	}
}

// duplicateTransaction commits the committed transaction of checkpoint id
// again, under a fresh id: exactly the damage a sink without transactions
// does on replay.
func duplicateTransaction(t *testing.T, bs blobstore.Blobstore, id string) {
	t.Helper()
	copyCommit(t, bs, bs, id, checkpoint.NewID(999))
}

func must(rc io.ReadCloser, err error) io.ReadCloser {
	if err != nil {
		return io.NopCloser(errReader{err})
	}
	return rc
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }
