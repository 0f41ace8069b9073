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

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

// recommitAs turns body, a committed OutPrefix object, into a commit of
// checkpoint id as with the same output: its header is replaced by one
// that commits the same bytes staged for as.
func recommitAs(t *testing.T, body []byte, as string) []byte {
	t.Helper()
	header, rest, ok := bytes.Cut(body, []byte("\n"))
	if !ok || !bytes.HasPrefix(header, []byte(committedHeader)) {
		t.Fatalf("not a committed transaction: %q", body)
	}
	return append([]byte(commitHeader(as, StagedKey(as, "e1"), digest(rest))), rest...)
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
