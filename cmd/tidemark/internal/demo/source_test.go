package demo

import (
	"slices"
	"testing"
)

func TestWordsAreDistinctForDistinctNumbers(t *testing.T) {
	seen := map[string]uint64{}
	for w := range uint64(50_000) {
		name := Word(w)
		if prev, dup := seen[name]; dup {
			t.Fatalf("Word(%d) = Word(%d) = %q", w, prev, name)
		}
		seen[name] = w
	}
}

func TestSourceReplaysTheSameRecordsFromAnyOffset(t *testing.T) {
	src := NewSource(5000, 100)
	all := make([]string, 5000)
	if n := src.Next(all); n != 5000 || !src.Done() {
		t.Fatalf("read %d records, done=%v; want 5000, true", n, src.Done())
	}
	for _, off := range []uint64{0, 1, 999, 4999} {
		again := NewSource(5000, 100)
		again.Seek(off)
		buf := make([]string, 7000)
		n := again.Next(buf)
		if !slices.Equal(buf[:n], all[off:]) {
			t.Errorf("after Seek(%d): records differ from the first read", off)
		}
	}
}

func TestSourceNextStopsAtTheEnd(t *testing.T) {
	src := NewSource(10, 3)
	src.Seek(8)
	buf := make([]string, 5)
	if n := src.Next(buf); n != 2 {
		t.Fatalf("Next at offset 8 of 10 read %d records, want 2", n)
	}
	if n := src.Next(buf); n != 0 || src.Offset() != 10 {
		t.Fatalf("Next at the end read %d (offset %d), want 0 (10)", n, src.Offset())
	}
	src.Seek(99)
	if src.Offset() != 10 {
		t.Fatalf("Seek past the end: offset %d, want 10", src.Offset())
	}
}

func TestSourceExpectedCountsEveryRecordOnce(t *testing.T) {
	src := NewSource(12345, 50)
	var total uint64
	for _, n := range src.Expected() {
		total += n
	}
	if total != 12345 {
		t.Fatalf("expected counts sum to %d, want 12345", total)
	}
	if got := len(src.Expected()); got != 50 {
		t.Fatalf("%d distinct words, want 50", got)
	}
}

func TestOffsetsRoundTrip(t *testing.T) {
	o := Offsets{Next: 42, Records: 100, Words: 7}
	got, err := DecodeOffsets(EncodeOffsets(o))
	if err != nil || got != o {
		t.Fatalf("DecodeOffsets(EncodeOffsets(%+v)) = %+v, %v", o, got, err)
	}
	if _, err := DecodeOffsets([]byte("{")); err == nil {
		t.Fatal("DecodeOffsets accepted malformed JSON")
	}
}
