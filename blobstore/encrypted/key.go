package encrypted

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
)

// KeySize is the length of a master key's material: AES-256.
const KeySize = 32

// MaxKeyIDLen is the longest key id the header has room for.
const MaxKeyIDLen = 32

// ErrInvalidKey is wrapped by the error of a key that cannot be used: the
// wrong length, bad base64, an unusable id, an unreadable file.
var ErrInvalidKey = errors.New("encrypted: invalid master key")

// Key is a master key: the material that wraps every object's data key,
// and the id recorded in each object's header so that a reader configured
// with another key can say which one the object needs.
type Key struct {
	// ID names the key in headers and error messages: 1 to MaxKeyIDLen
	// printable ASCII bytes. NewKey derives one from the material.
	ID string
	// Material is the AES-256 key.
	Material [KeySize]byte
}

// NewKey returns the key with material and, when id is empty, the id
// DefaultID derives from it.
func NewKey(id string, material []byte) (Key, error) {
	if len(material) != KeySize {
		return Key{}, fmt.Errorf("%w: %d bytes, want %d", ErrInvalidKey, len(material), KeySize)
	}
	var k Key
	copy(k.Material[:], material)
	if id == "" {
		id = DefaultID(material)
	}
	k.ID = id
	return k, k.validate()
}

// DefaultID is a key's id when the user gives none: the hex of the first
// 8 bytes of the SHA-256 of its material. It names the key without
// revealing it.
func DefaultID(material []byte) string {
	sum := sha256.Sum256(material)
	return hex.EncodeToString(sum[:8])
}

func (k Key) validate() error {
	if k.ID == "" || len(k.ID) > MaxKeyIDLen {
		return fmt.Errorf("%w: key id %q must be 1 to %d bytes", ErrInvalidKey, k.ID, MaxKeyIDLen)
	}
	for i := 0; i < len(k.ID); i++ {
		if c := k.ID[i]; c <= ' ' || c > '~' {
			return fmt.Errorf("%w: key id %q must be printable ASCII without spaces", ErrInvalidKey, k.ID)
		}
	}
	return nil
}

// ParseKey reads a key from b as a file holds it: exactly 32 raw bytes, or
// their standard base64 (surrounding white space ignored).
func ParseKey(id string, b []byte) (Key, error) {
	if len(b) == KeySize {
		return NewKey(id, b)
	}
	s := strings.TrimSpace(string(b))
	m, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return Key{}, fmt.Errorf("%w: neither %d raw bytes nor base64 (%d bytes)", ErrInvalidKey, KeySize, len(b))
	}
	return NewKey(id, m)
}

// LoadKeyFile reads a key from the file at path (see ParseKey).
func LoadKeyFile(path string) (Key, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Key{}, fmt.Errorf("%w: %w", ErrInvalidKey, err)
	}
	k, err := ParseKey("", b)
	if err != nil {
		return Key{}, fmt.Errorf("key file %s: %w", path, err)
	}
	return k, nil
}

// LoadKeyEnv reads a key from the environment variable name, which holds
// its base64. ok is false when the variable is unset or empty.
func LoadKeyEnv(name string) (k Key, ok bool, err error) {
	v := os.Getenv(name)
	if strings.TrimSpace(v) == "" {
		return Key{}, false, nil
	}
	k, err = ParseKeyBase64(v)
	if err != nil {
		return Key{}, true, fmt.Errorf("$%s: %w", name, err)
	}
	return k, true, nil
}

// ParseKeyBase64 reads a key from the standard base64 of its material, as
// an environment variable holds it (surrounding white space ignored).
func ParseKeyBase64(s string) (Key, error) {
	m, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return Key{}, fmt.Errorf("%w: not base64", ErrInvalidKey)
	}
	return NewKey("", m)
}
