package savepoint

import (
	"strings"
)

// The keys of savepoints in a store, made here and nowhere else. Labels
// and the savepoint area are sibling prefixes, so listing labels never
// pages through content.
//
//	savepoints/<label>                       a savepoint: its manifest object, or an archive (format 1)
//	savepoint-data/sha256/<64 hex>           a file's content, named by its SHA-256
//	savepoint-data/locks/<kind>-<16 hex>     a lock: kind "shared" (create, copy, import, read) or "exclusive" (delete)
const (
	// LabelPrefix holds one object per savepoint (checkpoint.SavepointPrefix).
	LabelPrefix = "savepoints/"
	// AreaPrefix holds everything savepoints share: content and locks.
	// Checkpoint GC never deletes under it.
	AreaPrefix = "savepoint-data/"
	// ContentPrefix holds content objects, each named by the lower-case
	// hex SHA-256 of its bytes.
	ContentPrefix = AreaPrefix + "sha256/"
	// LockPrefix holds the lock objects of savepoint operations.
	LockPrefix = AreaPrefix + "locks/"
)

// LabelKey returns the key of savepoint label's object. It does not
// validate label (see checkpoint.ValidateLabel).
func LabelKey(label string) string { return LabelPrefix + label }

// ContentKey returns the key of the content object whose SHA-256 is
// digest (64 lower-case hex digits).
func ContentKey(digest string) string { return ContentPrefix + digest }

// lockKey returns the key of a lock of kind with nonce.
func lockKey(k kind, nonce string) string { return LockPrefix + string(k) + "-" + nonce }

// Class names the part of the layout key belongs to: "label", "content",
// "lock", or "" for a key that is none of them (including a key under
// AreaPrefix that breaks the grammar above). Store identity and metrics
// use it; GC of checkpoints leaves every class alone.
func Class(key string) string {
	if rest, ok := strings.CutPrefix(key, LabelPrefix); ok {
		if rest != "" && !strings.Contains(rest, "/") {
			return "label"
		}
		return ""
	}
	if rest, ok := strings.CutPrefix(key, ContentPrefix); ok {
		if isHex(rest, 64) {
			return "content"
		}
		return ""
	}
	if rest, ok := strings.CutPrefix(key, LockPrefix); ok {
		if k, nonce, ok := parseLockName(rest); ok && k != "" && nonce != "" {
			return "lock"
		}
	}
	return ""
}

// digestOfKey returns the digest a content key names.
func digestOfKey(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, ContentPrefix)
	if !ok || !isHex(rest, 64) {
		return "", false
	}
	return rest, true
}

// parseLockName parses "<kind>-<16 hex>".
func parseLockName(name string) (kind, string, bool) {
	k, nonce, ok := strings.Cut(name, "-")
	if !ok || (kind(k) != shared && kind(k) != exclusive) || !isHex(nonce, 16) {
		return "", "", false
	}
	return kind(k), nonce, true
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
