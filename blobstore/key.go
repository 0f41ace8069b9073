package blobstore

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxKeyLen is the longest key, in bytes, that any store accepts (S3's
// limit).
const MaxKeyLen = 1024

// MaxSegmentLen is the longest '/'-separated segment of a key, in bytes.
// S3 itself allows longer segments, but filesystems (NAME_MAX) and MinIO,
// which stores a segment as a file name, do not; one rule for every store
// keeps a key that works on one working on all.
const MaxSegmentLen = 255

// ValidateKey reports whether key obeys the key rules: 1–1024 bytes of
// valid UTF-8, '/'-separated, no leading '/', no empty, "." or ".."
// segment, no segment over 255 bytes, and no control characters (C0, DEL
// or C1). The error wraps ErrInvalidKey.
func ValidateKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty key", ErrInvalidKey)
	}
	if err := validateChars(key); err != nil {
		return err
	}
	for seg := range strings.SplitSeq(key, "/") {
		if err := validateSegment(key, seg); err != nil {
			return err
		}
	}
	return nil
}

// ValidatePrefix reports whether prefix can be used with List. The empty
// prefix is valid. Otherwise every complete segment (all but the part after
// the last '/') must obey the key rules; the last part may be any partial
// segment, including empty (a trailing '/'). The error wraps ErrInvalidKey.
func ValidatePrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if err := validateChars(prefix); err != nil {
		return err
	}
	i := strings.LastIndexByte(prefix, '/')
	if len(prefix)-i-1 > MaxSegmentLen {
		return fmt.Errorf("%w: prefix %q ends in a segment over the %d-byte limit", ErrInvalidKey, prefix, MaxSegmentLen)
	}
	if i < 0 {
		return nil
	}
	for seg := range strings.SplitSeq(prefix[:i], "/") {
		if err := validateSegment(prefix, seg); err != nil {
			return err
		}
	}
	return nil
}

func validateChars(s string) error {
	if len(s) > MaxKeyLen {
		return fmt.Errorf("%w: %d bytes, over the %d-byte limit", ErrInvalidKey, len(s), MaxKeyLen)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: %q is not valid UTF-8", ErrInvalidKey, s)
	}
	for _, r := range s {
		if r < 0x20 || (r >= 0x7f && r <= 0x9f) {
			return fmt.Errorf("%w: %q contains control character %U", ErrInvalidKey, s, r)
		}
	}
	return nil
}

func validateSegment(key, seg string) error {
	switch seg {
	case "":
		if strings.HasPrefix(key, "/") {
			return fmt.Errorf("%w: %q starts with '/'", ErrInvalidKey, key)
		}
		return fmt.Errorf("%w: %q has an empty segment", ErrInvalidKey, key)
	case ".", "..":
		return fmt.Errorf("%w: %q has a %q segment", ErrInvalidKey, key, seg)
	}
	if len(seg) > MaxSegmentLen {
		return fmt.Errorf("%w: a segment of %d bytes, over the %d-byte limit", ErrInvalidKey, len(seg), MaxSegmentLen)
	}
	return nil
}
