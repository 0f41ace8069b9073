package checkpoint

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestNewIDSortsInSequenceOrder(t *testing.T) {
	seqs := []uint64{0, 1, 9, 10, 99, 100, 12345, 1 << 40, ^uint64(0)}
	var ids []string
	for _, s := range seqs {
		ids = append(ids, NewID(s))
	}
	if !slices.IsSorted(ids) {
		t.Fatalf("ids do not sort in sequence order: %q", ids)
	}
	for _, id := range ids {
		if len(id) != len(ids[0]) {
			t.Fatalf("ids are not fixed width: %q vs %q", id, ids[0])
		}
		if err := ValidateID(id); err != nil {
			t.Fatalf("ValidateID(%q): %v", id, err)
		}
	}
}

func TestParseIDInvertsNewID(t *testing.T) {
	for _, s := range []uint64{0, 7, ^uint64(0)} {
		got, err := ParseID(NewID(s))
		if err != nil || got != s {
			t.Fatalf("ParseID(NewID(%d)) = %d, %v", s, got, err)
		}
	}
}

func TestParseIDRejectsForeignIDs(t *testing.T) {
	for _, id := range []string{"", "ckpt-1", "chk-00000000000000000001", "ckpt-0000000000000000000x", "ckpt-99999999999999999999"} {
		// The reason is in ParseID's own words, not strconv's.
		if _, err := ParseID(id); !errors.Is(err, ErrInvalidID) || strings.Contains(err.Error(), "strconv") {
			t.Errorf("ParseID(%q) err = %v, want ErrInvalidID in plain words", id, err)
		}
	}
}

func TestNextIDContinuesTheSequence(t *testing.T) {
	first, err := NextID("")
	if err != nil || first != NewID(1) {
		t.Fatalf("NextID(\"\") = %q, %v; want %q", first, err, NewID(1))
	}
	next, err := NextID(NewID(41))
	if err != nil || next != NewID(42) {
		t.Fatalf("NextID(41) = %q, %v", next, err)
	}
	if _, err := NextID(NewID(^uint64(0))); !errors.Is(err, ErrInvalidID) {
		t.Fatalf("NextID(max) err = %v, want ErrInvalidID", err)
	}
}

func TestValidateID(t *testing.T) {
	cases := []struct {
		id string
		ok bool
	}{
		{NewID(1), true},
		{"job-a_1.2", true},
		{"", false},
		{"a/b", false},
		{"../x", false},
		{"..", false},
		{".", false},
		{`a\b`, false},
		{".hidden", false},
		{"latest", false},
		{"latest-completed", false},
		{"a\x00b", false},
		{"a\nb", false},
		{strings.Repeat("x", 201), false},
		{"\xff", false},
	}
	for _, c := range cases {
		err := ValidateID(c.id)
		if c.ok && err != nil {
			t.Errorf("ValidateID(%q) = %v, want ok", c.id, err)
		}
		if !c.ok && !errors.Is(err, ErrInvalidID) {
			t.Errorf("ValidateID(%q) = %v, want ErrInvalidID", c.id, err)
		}
	}
}
