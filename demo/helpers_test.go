package demo

import (
	"bytes"
	"io"
)

func readAllClose(rc io.ReadCloser) ([]byte, error) {
	defer rc.Close()
	return io.ReadAll(rc)
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }
