package encrypted

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The object format, version 1 (docs/encryption.md):
//
//	header (HeaderSize bytes, every byte authenticated):
//	  magic "TMKENC" | version 1 | reserved 0 | key id length | key id, zero padded to 32
//	  | nonce prefix (4) | wrap nonce (12) | data key sealed under the master key (32 + 16)
//	chunks: ChunkSize bytes of plaintext each, sealed under the data key
//	  nonce = nonce prefix | chunk index (8, big endian)
//	  additional data = chunk index (8, big endian) | last flag (1)
//
// The last chunk is the only short one, or empty (an empty object); its
// flag detects truncation at a chunk boundary, and the index in both the
// nonce and the additional data detects reordering.
const (
	magic = "TMKENC"
	// Version is the format version written in every header.
	Version = 1
	// ChunkSize is how many bytes of plaintext one sealed chunk holds.
	ChunkSize = 64 << 10
	// HeaderSize is the fixed size of an object's header.
	HeaderSize = len(magic) + 3 + MaxKeyIDLen + prefixSize + nonceSize + KeySize + tagSize

	tagSize    = 16
	nonceSize  = 12
	prefixSize = 4
	sealedSize = ChunkSize + tagSize

	offID     = len(magic) + 3
	offPrefix = offID + MaxKeyIDLen
	offWrap   = offPrefix + prefixSize

	// maxPlain bounds offsets so that no chunk arithmetic overflows.
	maxPlain = 1 << 50
)

var (
	// ErrWrongKey is wrapped by the error of a read of an object encrypted
	// under a master key other than the store's; the message names both
	// key ids.
	ErrWrongKey = errors.New("encrypted: object encrypted under another key")
	// ErrCorrupt is wrapped by the error of a read of an encrypted object
	// that fails authentication: a flipped bit, a truncation, chunks out
	// of order. No plaintext of a failing chunk is ever returned.
	ErrCorrupt = errors.New("encrypted: object fails authentication")
	// ErrNotEncrypted is wrapped by the error of a read of an object that
	// should be encrypted (the store's predicate says so) but has no
	// header: a plain object, refused rather than trusted.
	ErrNotEncrypted = errors.New("encrypted: object is not encrypted")
)

// CiphertextSize returns the size of the stored object that holds plain
// bytes of plaintext.
func CiphertextSize(plain int64) int64 {
	chunks := (plain + ChunkSize - 1) / ChunkSize
	if chunks == 0 {
		chunks = 1
	}
	return int64(HeaderSize) + plain + chunks*tagSize
}

// PlaintextSize returns the size of the plaintext a stored object of
// cipher bytes holds; ok is false when no object of the format has that
// size.
func PlaintextSize(cipher int64) (plain int64, ok bool) {
	x := cipher - int64(HeaderSize)
	if x < tagSize {
		return 0, false
	}
	full, rest := x/sealedSize, x%sealedSize
	switch {
	case rest == 0:
		return full * ChunkSize, true
	case rest < tagSize:
		return 0, false
	default:
		return full*ChunkSize + rest - tagSize, true
	}
}

func newGCM(key []byte) (cipher.AEAD, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

// objectKey is what a header yields: the data key's AEAD and the chunk
// nonce prefix.
type objectKey struct {
	aead   cipher.AEAD
	prefix [prefixSize]byte
}

func (o *objectKey) nonce(dst *[nonceSize]byte, idx uint64) []byte {
	copy(dst[:prefixSize], o.prefix[:])
	binary.BigEndian.PutUint64(dst[prefixSize:], idx)
	return dst[:]
}

func chunkAD(dst *[9]byte, idx uint64, last bool) []byte {
	binary.BigEndian.PutUint64(dst[:8], idx)
	dst[8] = 0
	if last {
		dst[8] = 1
	}
	return dst[:]
}

// newHeader draws a fresh data key and nonce prefix and returns the
// header that carries them, wrapped under master.
func newHeader(master cipher.AEAD, id string) ([]byte, *objectKey, error) {
	h := make([]byte, HeaderSize)
	copy(h, magic)
	h[len(magic)] = Version
	h[len(magic)+2] = byte(len(id))
	copy(h[offID:], id)
	var dk [KeySize]byte
	if _, err := io.ReadFull(rand.Reader, dk[:]); err != nil {
		return nil, nil, err
	}
	if _, err := io.ReadFull(rand.Reader, h[offPrefix:offWrap+nonceSize]); err != nil {
		return nil, nil, err
	}
	master.Seal(h[:offWrap+nonceSize], h[offWrap:offWrap+nonceSize], dk[:], h[:offWrap])
	aead, err := newGCM(dk[:])
	if err != nil {
		return nil, nil, err
	}
	ok := &objectKey{aead: aead}
	copy(ok.prefix[:], h[offPrefix:])
	return h, ok, nil
}

// isHeader reports whether b starts like a header (its magic).
func isHeader(b []byte) bool {
	return len(b) >= len(magic) && string(b[:len(magic)]) == magic
}

// headerKeyID returns the key id a header names.
func headerKeyID(h []byte) string {
	n := int(h[len(magic)+2])
	if n > MaxKeyIDLen {
		n = MaxKeyIDLen
	}
	return string(h[offID : offID+n])
}

// openHeader checks h, a whole header read from object, and unwraps its
// data key with master (whose id is id).
func openHeader(master cipher.AEAD, id, object string, h []byte) (*objectKey, error) {
	if !isHeader(h) {
		return nil, fmt.Errorf("%w: %q has no encryption header (a plain object where the store encrypts)", ErrNotEncrypted, object)
	}
	if len(h) < HeaderSize {
		return nil, fmt.Errorf("%w: %q: header cut at %d bytes", ErrCorrupt, object, len(h))
	}
	if v := h[len(magic)]; v != Version {
		return nil, fmt.Errorf("%w: %q: unknown format version %d", ErrCorrupt, object, v)
	}
	if got := headerKeyID(h); got != id {
		return nil, fmt.Errorf("%w: %q is encrypted under key id %q, the store's key is %q", ErrWrongKey, object, got, id)
	}
	dk, err := master.Open(nil, h[offWrap:offWrap+nonceSize], h[offWrap+nonceSize:HeaderSize], h[:offWrap])
	if err != nil {
		return nil, fmt.Errorf("%w: %q: the data key does not unwrap under key id %q (a tampered header, or other key material under the same id)", ErrCorrupt, object, id)
	}
	aead, err := newGCM(dk)
	if err != nil {
		return nil, err
	}
	ok := &objectKey{aead: aead}
	copy(ok.prefix[:], h[offPrefix:])
	return ok, nil
}

// sealer is the ciphertext of src: the header, then its chunks.
type sealer struct {
	src   io.Reader
	key   *objectKey
	plain []byte // ChunkSize+1: a chunk and one byte of look-ahead
	have  int
	out   []byte // ciphertext not yet read
	buf   []byte
	idx   uint64
	done  bool
	err   error
}

func newSealer(src io.Reader, header []byte, key *objectKey) *sealer {
	return &sealer{
		src: src, key: key, out: header,
		plain: make([]byte, ChunkSize+1),
		buf:   make([]byte, 0, sealedSize),
	}
}

func (s *sealer) Read(p []byte) (int, error) {
	for len(s.out) == 0 {
		if s.err != nil {
			return 0, s.err
		}
		if s.done {
			return 0, io.EOF
		}
		s.err = s.seal()
	}
	n := copy(p, s.out)
	s.out = s.out[n:]
	return n, nil
}

// seal seals the next chunk into out. A chunk is last when the source
// ends within it: the one byte read past it tells.
func (s *sealer) seal() error {
	n, err := io.ReadFull(s.src, s.plain[s.have:])
	s.have += n
	ended := false
	switch {
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		ended = true
	case err != nil:
		return err
	}
	size := min(s.have, ChunkSize)
	last := ended && s.have <= ChunkSize
	var nonce [nonceSize]byte
	var ad [9]byte
	s.out = s.key.aead.Seal(s.buf[:0], s.key.nonce(&nonce, s.idx), s.plain[:size], chunkAD(&ad, s.idx, last))
	s.idx++
	if s.have > ChunkSize {
		s.plain[0] = s.plain[ChunkSize]
		s.have = 1
	} else {
		s.have = 0
	}
	s.done = last
	return nil
}
