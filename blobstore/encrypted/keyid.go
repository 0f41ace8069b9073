package encrypted

import (
	"fmt"

	"github.com/tidemark-io/tidemark/blobstore"
)

// Keyed is implemented by the stores New returns: KeyID is the id of the
// master key they write and read under, and Encrypts reports whether the
// object at key is encrypted (Options.Encrypt). Callers find it through
// a chain of decorators with blobstore.As; KeyIDOf and CheckKey do.
type Keyed interface {
	KeyID() string
	Encrypts(key string) bool
}

var _ Keyed = (*store)(nil)

// KeyID returns the id of the store's master key.
func (s *store) KeyID() string { return s.id }

// Encrypts reports whether the store encrypts the object at key.
func (s *store) Encrypts(key string) bool { return s.encrypt(key) }

// KeyIDOf returns the id of the master key bs writes the object at key
// under: that of the first encrypting store (New) down bs's chain of
// decorators, or "" when there is none (a plain store, or Detect's) or
// it leaves key plain. Records and manifests store it, so that a reader
// without the key is refused, naming it, before it reads or changes
// anything (CheckKey).
func KeyIDOf(bs blobstore.Blobstore, key string) string {
	k, ok := blobstore.As[Keyed](bs)
	if !ok || !k.Encrypts(key) {
		return ""
	}
	return k.KeyID()
}

// CheckKey checks, reading nothing, that bs can read what was recorded
// as encrypted under key id want; what names it in the error ("the files
// of checkpoint X"). It fails with an error wrapping ErrNoKey, naming
// want, when bs has no key, and ErrWrongKey, naming both ids, when its
// key is another. want "" (plain, or recorded before key ids were) is
// never refused: reading what is there tells.
func CheckKey(bs blobstore.Blobstore, want, what string) error {
	if want == "" {
		return nil
	}
	k, ok := blobstore.As[Keyed](bs)
	switch {
	case !ok:
		return fmt.Errorf("%w: %s are encrypted under key id %q", ErrNoKey, what, want)
	case k.KeyID() != want:
		return fmt.Errorf("%w: %s are encrypted under key id %q, the store's key is %q", ErrWrongKey, what, want, k.KeyID())
	}
	return nil
}

// ValidateKeyID checks a key id read from a record or manifest: 1 to
// MaxKeyIDLen printable ASCII bytes without spaces, as Key requires.
func ValidateKeyID(id string) error {
	return Key{ID: id}.validate()
}
