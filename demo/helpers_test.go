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
// checkpoint id as with the same output: its header is replaced by the
// header of the old layout ("committed <as>", naming no staged object),
// which Output still reads.
func recommitAs(t *testing.T, body []byte, as string) []byte {
	t.Helper()
	header, rest, ok := bytes.Cut(body, []byte("\n"))
	if !ok || !bytes.HasPrefix(header, []byte(committedHeader)) {
		t.Fatalf("not a committed transaction: %q", body)
	}
	return append([]byte(committedHeader+as+"\n"), rest...)
}
