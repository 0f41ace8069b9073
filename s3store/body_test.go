package s3store

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// shortWriter accepts at most max bytes per Write, then fails.
type shortWriter struct {
	bytes.Buffer
	max int
}

func (w *shortWriter) Write(p []byte) (int, error) {
	if len(p) > w.max {
		n, _ := w.Buffer.Write(p[:w.max])
		return n, nil
	}
	return w.Buffer.Write(p)
}

func TestWriteToCopiesInSmallWrites(t *testing.T) {
	data := randomBytes(3*getRead+12345, 1)
	var sizes []int
	w := writerFunc(func(p []byte) (int, error) { sizes = append(sizes, len(p)); return len(p), nil })
	n, err := writeTo(bytes.NewReader(data), w)
	if err != nil || n != int64(len(data)) {
		t.Fatalf("writeTo: %d bytes, %v", n, err)
	}
	for _, s := range sizes {
		if s > getWrite {
			t.Fatalf("a write of %d bytes, over %d", s, getWrite)
		}
	}
	var got bytes.Buffer
	if _, err := writeTo(iotest.HalfReader(bytes.NewReader(data)), &got); err != nil || !bytes.Equal(got.Bytes(), data) {
		t.Fatalf("writeTo through a half reader: equal %v, %v", bytes.Equal(got.Bytes(), data), err)
	}
}

func TestWriteToReportsErrors(t *testing.T) {
	boom := errors.New("boom")
	if _, err := writeTo(iotest.DataErrReader(iotest.ErrReader(boom)), io.Discard); !errors.Is(err, boom) {
		t.Errorf("read error: %v", err)
	}
	sw := &shortWriter{max: 10}
	if n, err := writeTo(bytes.NewReader(randomBytes(100, 2)), sw); err != io.ErrShortWrite || n != 10 {
		t.Errorf("short write: %d, %v; want 10, io.ErrShortWrite", n, err)
	}
	// A body cut short ends with the transport's error, not a clean EOF.
	cut := io.MultiReader(bytes.NewReader([]byte("abc")), iotest.ErrReader(io.ErrUnexpectedEOF))
	if _, err := writeTo(cut, io.Discard); err != io.ErrUnexpectedEOF {
		t.Errorf("cut body: %v, want io.ErrUnexpectedEOF", err)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
