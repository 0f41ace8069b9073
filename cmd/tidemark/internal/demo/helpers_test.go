package demo

import (
	"bytes"
	"io"
	"testing"
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
