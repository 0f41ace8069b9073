package filestore

import (
	"path"
	"strings"
)

// Names on disk. A key segment shorter than pieceLen bytes is stored under
// its own name. A longer one (up to 1,024 bytes, more than NAME_MAX) is
// split into pieces of exactly pieceLen bytes, each a directory named
// piece+contMark, followed by the remainder (shorter than pieceLen, maybe
// empty) named rest+lastMark. Keys contain no control characters, so
// these names cannot collide with plain names or with temporary files.
//
// The lengths are what keeps List's per-directory sort correct: a plain
// name (< pieceLen bytes) can never equal a piece (= pieceLen bytes), so
// the keys under a piece directory never interleave with a sibling's.
const (
	pieceLen = 200
	contMark = "\x01"
	lastMark = "\x02"
)

// keyComponents returns the path components that store key. key must be
// valid.
func keyComponents(key string) []string {
	var comps []string
	for seg := range strings.SplitSeq(key, "/") {
		comps = appendSegment(comps, seg)
	}
	return comps
}

func appendSegment(comps []string, seg string) []string {
	if len(seg) < pieceLen {
		return append(comps, seg)
	}
	for len(seg) >= pieceLen {
		comps = append(comps, seg[:pieceLen]+contMark)
		seg = seg[pieceLen:]
	}
	return append(comps, seg+lastMark)
}

// keyPath returns the slash-separated path, relative to the root, of the
// file that stores key. key must be valid.
func keyPath(key string) string {
	return path.Join(keyComponents(key)...)
}
