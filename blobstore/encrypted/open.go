package encrypted

import (
	"bufio"
	"fmt"
	"io"
)

// unsealer is the plaintext of a stream of sealed chunks, starting at
// chunk idx: it skips skip bytes of the first chunk's plaintext and
// yields at most remain bytes (remain < 0: to the end).
type unsealer struct {
	src    *bufio.Reader
	closer io.Closer
	key    *objectKey
	object string
	idx    uint64
	skip   int
	remain int64
	// mayBeEmpty is set for a range that starts past chunk 0, which may
	// start past the end of the object: no chunk there is no error.
	mayBeEmpty bool
	// verifyEnd checks, when such a range finds no chunk, that the
	// object truly ends before it (is not truncated).
	verifyEnd func() error
	started   bool
	buf       []byte
	out       []byte
	done      bool
	err       error
}

func newUnsealer(rc io.ReadCloser, src *bufio.Reader, key *objectKey, object string, idx uint64, skip int, remain int64) *unsealer {
	return &unsealer{
		src: src, closer: rc, key: key, object: object,
		idx: idx, skip: skip, remain: remain, mayBeEmpty: idx > 0,
		buf: make([]byte, sealedSize),
	}
}

func (u *unsealer) Read(p []byte) (int, error) {
	if u.remain == 0 {
		return 0, io.EOF
	}
	for len(u.out) == 0 {
		if u.err != nil {
			return 0, u.err
		}
		if u.done {
			return 0, io.EOF
		}
		u.err = u.open()
	}
	n := len(p)
	if u.remain >= 0 && int64(n) > u.remain {
		n = int(u.remain)
	}
	n = copy(p[:n], u.out)
	u.out = u.out[n:]
	if u.remain > 0 {
		u.remain -= int64(n)
	}
	return n, nil
}

// open authenticates and decrypts the next chunk into out. A chunk is the
// last when the stream ends with it: a short chunk, or a full one with
// nothing after it (the range asked for one byte past a full chunk).
func (u *unsealer) open() error {
	n, err := io.ReadFull(u.src, u.buf)
	first := !u.started
	u.started = true
	last := false
	switch {
	case err == io.EOF:
		if first && u.mayBeEmpty {
			if err := u.verifyEnd(); err != nil {
				return err
			}
			u.done = true // a range past the end
			return nil
		}
		return fmt.Errorf("%w: %q ends before its last chunk (chunk %d missing)", ErrCorrupt, u.object, u.idx)
	case err == io.ErrUnexpectedEOF:
		last = true
	case err != nil:
		return err
	default:
		if _, perr := u.src.Peek(1); perr == io.EOF {
			last = true
		} else if perr != nil {
			return perr
		}
	}
	plain, err := u.key.openChunk(u.buf[:n], u.object, u.idx, last)
	if err != nil {
		return err
	}
	u.idx++
	u.done = last
	if u.skip > 0 {
		s := min(u.skip, len(plain))
		plain = plain[s:]
		u.skip = 0
	}
	u.out = plain
	return nil
}

func (u *unsealer) Close() error { return u.closer.Close() }

// openChunk authenticates and decrypts sealed, chunk idx of object, in
// place.
func (o *objectKey) openChunk(sealed []byte, object string, idx uint64, last bool) ([]byte, error) {
	if len(sealed) < tagSize {
		return nil, fmt.Errorf("%w: %q: chunk %d cut to %d bytes", ErrCorrupt, object, idx, len(sealed))
	}
	var nonce [nonceSize]byte
	var ad [9]byte
	plain, err := o.aead.Open(sealed[:0], o.nonce(&nonce, idx), sealed, chunkAD(&ad, idx, last))
	if err != nil {
		return nil, fmt.Errorf("%w: %q: chunk %d (tampered, truncated or out of place)", ErrCorrupt, object, idx)
	}
	return plain, nil
}
