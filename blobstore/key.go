package blobstore

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxKeyLen is the longest key, in bytes, that any store accepts (S3's
// limit).
const MaxKeyLen = 1024

// MaxSegmentLen is the longest '/'-separated segment of a key, in bytes.
// S3 itself allows longer segments, but filesystems (NAME_MAX, 255) and
// MinIO, which stores a segment as a file name, do not; and a MinIO whose
// data lives on an overlay filesystem (the writable layer of a container)
// refuses names over 251 bytes, since overlayfs needs room for its ".wh."
// whiteout names. One rule for every store keeps a key that works on one
// working on all.
const MaxSegmentLen = 251

// reservedSegment is a segment no key may have, compared without regard
// to case. MinIO keeps an object's metadata in the file xl.meta inside a
// directory named by its key, so it refuses "a/xl.meta" once "a" exists
// (403 AccessDenied) and, worse, "a" once "a/xl.meta" exists (a 400
// IncompleteBody): a key that works until a sibling is written.
const reservedSegment = "xl.meta"

// ReservedUploadsSegment is a segment no key may have, on any store: the
// S3 store keeps the records of the multipart uploads it starts under
// "<prefix>/.tidemark-uploads/" (docs/s3.md, "Upload records"),
// and a key there would be mistaken for one, or hidden from List.
const ReservedUploadsSegment = ".tidemark-uploads"

// dirObjectSuffix is how MinIO stores a key ending in '/': a key that
// ends in it is listed as that other key ("a__XLDIR__" as "a/").
const dirObjectSuffix = "__XLDIR__"

// ValidateKey reports whether key obeys the key rules: 1–1024 bytes of
// valid UTF-8, '/'-separated, no leading '/', no empty segment, no segment
// over 251 bytes, no control characters (C0, DEL or C1) nor U+FFFE or
// U+FFFF (which XML, and so an S3 listing, cannot carry), no dot segment,
// no segment named xl.meta and no "__XLDIR__" at the end (MinIO's own
// names for metadata and directory markers), and no segment
// ReservedUploadsSegment. The error wraps ErrInvalidKey.
//
// A dot segment is "." or ".." once '\' also counts as a separator and
// spaces around it are ignored: "a/./b" and "a/../b" but also `a\..\b`,
// `..\x`, "a/ .. /b" and ". ". S3 itself stores such keys, but MinIO
// refuses them (400 XMinioInvalidResourceName: it splits on both slashes,
// for Windows, and trims the spaces of each segment) and other servers
// map keys onto file paths the same way. The rules are the intersection
// of what every store Tidemark runs on accepts, so that a key valid on one
// store is valid on all; the integration tests check them against real
// servers.
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
	if strings.HasSuffix(key, dirObjectSuffix) {
		return fmt.Errorf("%w: %q ends in %q, which MinIO reads as a directory marker", ErrInvalidKey, key, dirObjectSuffix)
	}
	return nil
}

// ValidatePrefix reports whether prefix can be used with List. The empty
// prefix is valid. Otherwise every complete segment (all but the part after
// the last '/') must obey the key rules; the last part may be any partial
// segment, including empty (a trailing '/'), but no dot segment (".",
// "..", `x\.` and so on, see ValidateKey). The error wraps ErrInvalidKey.
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
	// A partial segment that is a dot segment matches keys ("a/.b"), but
	// MinIO checks list prefixes as it checks keys and refuses the request.
	if dots := dotSegment(prefix[i+1:]); dots != "" {
		return fmt.Errorf("%w: prefix %q ends in the dot segment %q", ErrInvalidKey, prefix, dots)
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
		if r == 0xfffe || r == 0xffff {
			// Not characters XML 1.0 can carry: an S3 listing (an XML
			// document) would report another key.
			return fmt.Errorf("%w: %q contains the noncharacter %U, which S3 listings cannot carry", ErrInvalidKey, s, r)
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
	if dots := dotSegment(seg); dots != "" {
		return fmt.Errorf("%w: %q has the dot segment %q ('\\' separates and spaces are trimmed on some servers)", ErrInvalidKey, key, dots)
	}
	if strings.EqualFold(seg, reservedSegment) {
		return fmt.Errorf("%w: %q has a segment %q, which MinIO reserves for its metadata", ErrInvalidKey, key, seg)
	}
	if seg == ReservedUploadsSegment {
		return fmt.Errorf("%w: %q has the segment %q, reserved for the S3 store's upload records", ErrInvalidKey, key, seg)
	}
	return nil
}

// dotSegment returns the part of seg (a '/'-free segment) that is a dot
// segment when '\' separates too and surrounding white space is trimmed,
// or "" if there is none.
func dotSegment(seg string) string {
	if strings.IndexByte(seg, '.') < 0 {
		return "" // the common case, without allocating
	}
	for part := range strings.SplitSeq(seg, `\`) {
		// Unicode white space, not just the ASCII space MinIO trims: a
		// server that trims more would refuse more.
		switch strings.TrimFunc(part, unicode.IsSpace) {
		case ".", "..":
			return part
		}
	}
	return ""
}
