// Package jsonscan walks JSON that is already known to be valid without
// decoding it: it yields the raw bytes of object members and array
// elements as sub-slices of the input, so that a decoder can count and
// measure a hostile document before allocating in proportion to it.
//
// Every function requires valid JSON (json.Valid); on anything else the
// results are unspecified, but the functions never panic or loop.
package jsonscan

import (
	"encoding/json"
	"errors"
	"strings"
)

// ErrNotContainer is returned for a value that is not the object or
// array the caller asked to walk.
var ErrNotContainer = errors.New("jsonscan: not an object or array")

type scanner struct {
	b []byte
	i int
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// str skips a string starting at its opening quote and returns its raw
// content, without the quotes and with escapes as written.
func (s *scanner) str() []byte {
	start := s.i + 1
	for s.i++; s.i < len(s.b); s.i++ {
		switch s.b[s.i] {
		case '\\':
			s.i++
		case '"':
			s.i++
			return s.b[start : s.i-1]
		}
	}
	return s.b[start:]
}

// value skips one value and returns its raw bytes. Nesting is counted
// rather than recursed into, so depth costs no stack.
func (s *scanner) value() []byte {
	s.ws()
	start := s.i
	depth := 0
	for s.i < len(s.b) {
		switch c := s.b[s.i]; c {
		case '"':
			s.str()
		case '{', '[':
			depth++
			s.i++
		case '}', ']':
			if depth == 0 {
				return s.b[start:s.i]
			}
			depth--
			s.i++
		case ',', ':':
			if depth == 0 {
				return s.b[start:s.i]
			}
			s.i++
		case ' ', '\t', '\n', '\r':
			if depth == 0 {
				return s.b[start:s.i]
			}
			s.i++
		default:
			s.i++
		}
		if depth == 0 && (s.b[start] == '"' || s.b[start] == '{' || s.b[start] == '[') {
			return s.b[start:s.i]
		}
	}
	return s.b[start:s.i]
}

// Object calls fn with the raw key (escapes as written, no quotes) and the
// raw value of every member of the object v, in order, stopping at the
// first error fn returns. A null v has no members.
func Object(v []byte, fn func(key, value []byte) error) error {
	s := &scanner{b: v}
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == 'n' {
		return nil
	}
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return ErrNotContainer
	}
	s.i++
	for {
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] == '}' {
			return nil
		}
		if s.b[s.i] == ',' {
			s.i++
			s.ws()
		}
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return nil
		}
		key := s.str()
		s.ws()
		s.i++ // ':'
		val := s.value()
		if err := fn(key, val); err != nil {
			return err
		}
	}
}

// Array calls fn with the raw bytes of every element of the array v, in
// order, stopping at the first error fn returns. A null v has none.
func Array(v []byte, fn func(elem []byte) error) error {
	s := &scanner{b: v}
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == 'n' {
		return nil
	}
	if s.i >= len(s.b) || s.b[s.i] != '[' {
		return ErrNotContainer
	}
	s.i++
	for {
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] == ']' {
			return nil
		}
		if s.b[s.i] == ',' {
			s.i++
		}
		if err := fn(s.value()); err != nil {
			return err
		}
	}
}

// IsString reports whether the raw value v is a string.
func IsString(v []byte) bool { return len(v) > 0 && v[0] == '"' }

// KeyIs reports whether the raw key matches name the way encoding/json
// matches a struct field: after unescaping, ignoring case.
func KeyIs(key []byte, name string) bool {
	// An escaped spelling ("\u006f") is at most 12 bytes a character.
	if len(key) > 12*len(name) {
		return false
	}
	k := string(key)
	if strings.ContainsRune(k, '\\') && json.Unmarshal([]byte(`"`+k+`"`), &k) != nil {
		return false
	}
	return strings.EqualFold(k, name)
}
