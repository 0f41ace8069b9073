package demo

import (
	"encoding/json"
	"fmt"
)

// DefaultWords is the vocabulary size of the default source.
const DefaultWords = 1000

// syllables make the generated words pronounceable, so the output reads
// like word counts rather than hashes.
var syllables = []string{
	"ta", "ri", "mo", "ke", "lu", "sa", "ne", "po", "di", "ga",
	"vo", "mi", "ru", "ba", "te", "zo", "fi", "la", "xu", "he",
}

// mix is splitmix64's finalizer: a fixed bijection that scatters record
// numbers over the vocabulary, deterministically on every machine.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// Word returns the name of word number w of the vocabulary: distinct for
// distinct w, made of syllables ("tari", "moke", …).
func Word(w uint64) string {
	n := uint64(len(syllables))
	s := syllables[w%n] + syllables[(w/n)%n]
	for w /= n * n; w > 0; w /= n {
		s += syllables[w%n]
	}
	return s
}

// Source is a deterministic, replayable source of records: record i (an
// offset, counting from 0) is always the same word, Word(mix(i) % Words),
// so seeking to an offset and reading again produces exactly the records
// that were read from there before. It stands in for a partitioned log
// (Kafka) whose consumer offsets the checkpoint records.
//
// A Source is not safe for concurrent use.
type Source struct {
	records uint64 // total number of records
	words   uint64 // vocabulary size
	next    uint64 // offset of the next record to read
}

// NewSource returns a source of records records over a vocabulary of
// words words (DefaultWords when words ≤ 0), positioned at offset 0.
func NewSource(records uint64, words int) *Source {
	if words <= 0 {
		words = DefaultWords
	}
	return &Source{records: records, words: uint64(words)}
}

// Records returns the total number of records.
func (s *Source) Records() uint64 { return s.records }

// Words returns the vocabulary size.
func (s *Source) Words() int { return int(s.words) }

// At returns record i.
func (s *Source) At(i uint64) string { return Word(mix(i) % s.words) }

// Offset returns the offset of the next record Next will return: the
// number of records consumed so far.
func (s *Source) Offset() uint64 { return s.next }

// Seek positions the source so that the next record read is record off.
// Seeking past the end positions it at the end.
func (s *Source) Seek(off uint64) { s.next = min(off, s.records) }

// Done reports whether every record has been read.
func (s *Source) Done() bool { return s.next >= s.records }

// Next fills buf with the next records and returns how many it read:
// len(buf), or fewer at the end of the source (0 once Done).
func (s *Source) Next(buf []string) int {
	n := 0
	for n < len(buf) && s.next < s.records {
		buf[n] = s.At(s.next)
		s.next++
		n++
	}
	return n
}

// Expected returns the word counts a correct run over the whole source
// produces: every record counted exactly once.
func (s *Source) Expected() map[string]uint64 { return s.ExpectedRange(0, s.records) }

// ExpectedRange returns the word counts of records [from, to): what a
// correct run produces from offset from on (to is capped at the end of
// the source).
func (s *Source) ExpectedRange(from, to uint64) map[string]uint64 {
	out := make(map[string]uint64, s.words)
	for i := from; i < min(to, s.records); i++ {
		out[s.At(i)]++
	}
	return out
}

// Offsets is what the job records as its source position in a checkpoint
// (CheckpointData.Source[checkpoint.SourceOffsetsKey]).
type Offsets struct {
	// Next is the offset of the first record not covered by the
	// checkpoint: the resumed job reads from here.
	Next uint64 `json:"next"`
	// Records and Words identify the source, so that a job resumed with
	// other parameters refuses instead of mixing two jobs' counts.
	Records uint64 `json:"records"`
	Words   int    `json:"words"`
}

// Offsets returns the source's current position.
func (s *Source) Offsets() Offsets {
	return Offsets{Next: s.next, Records: s.records, Words: int(s.words)}
}

// EncodeOffsets returns the JSON form of o.
func EncodeOffsets(o Offsets) []byte {
	b, _ := json.Marshal(o) // cannot fail: plain integers
	return b
}

// DecodeOffsets parses offsets written by EncodeOffsets.
func DecodeOffsets(b []byte) (Offsets, error) {
	var o Offsets
	if err := json.Unmarshal(b, &o); err != nil {
		return Offsets{}, fmt.Errorf("demo: decode offsets %q: %w", b, err)
	}
	return o, nil
}
