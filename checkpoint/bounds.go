package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/tidemark-io/tidemark/internal/jsonscan"
)

// Record limits. A record is untrusted input: a savepoint from another
// site, or an object anyone with write access to the store can replace.
// DecodeRecord checks these limits on the raw bytes, before decoding
// allocates anything in proportion to them. Sizes are of the JSON
// encoding (base64 for values, escapes as written). A job far inside
// them never meets them: the coordinator writes one offsets value and
// one entry per operator and owner.
//
// Memory. With the limits below, decoding the largest accepted record
// peaks under 3 × MaxRecordBytes + 16 MiB above the record's own bytes,
// the bound package archive states for a manifest, as measured on crafted
// records at the limits (TestPeakHeapRestoringLargestRecords here,
// TestPeakHeapDecodingLargestRecords in blobstorage). Without them a
// 60 MiB record of 4.4 million empty operators took 1.5 GiB and 22 s.
const (
	// MaxRecordBytes bounds the size of a record, checked before it is
	// read whole (the record of an archive is bounded by the manifest).
	MaxRecordBytes = 64 << 20
	// MaxOwners bounds the owners a record lists in state_dirs (and in
	// every other per-owner collection a Storage adds).
	MaxOwners = 10_000
	// MaxOperators bounds the entries of Operators.
	MaxOperators = 10_000
	// MaxSourceEntries bounds the entries of Source.
	MaxSourceEntries = 10_000
	// MaxNameBytes bounds every name in a record: owner, operator and
	// source keys, state directories and the sink's transaction id.
	MaxNameBytes = 1 << 10
	// MaxValueBytes bounds the encoded values of Operators and Source
	// together.
	MaxValueBytes = 8 << 20
)

// ErrRecordTooLarge is wrapped by the refusal of a record over one of
// the record limits; the message names the limit.
var ErrRecordTooLarge = errors.New("checkpoint: record over limit")

func overLimit(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrRecordTooLarge, fmt.Sprintf(format, args...))
}

// ReadRecordBytes reads a record from r, refusing one over
// MaxRecordBytes before holding more than that.
func ReadRecordBytes(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxRecordBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxRecordBytes {
		return nil, overLimit("over %d bytes", MaxRecordBytes)
	}
	return b, nil
}

// CheckRecordBounds checks the record limits on the raw bytes b of a
// record, allocating nothing in proportion to them. Every Storage calls
// it on what it reads and on what it writes, so that whatever is saved
// can be read back.
func CheckRecordBounds(b []byte) error {
	if len(b) > MaxRecordBytes {
		return overLimit("%d bytes, over the %d-byte limit", len(b), MaxRecordBytes)
	}
	if !json.Valid(b) {
		return errors.New("not valid JSON")
	}
	var owners, operators, sources, values int
	return jsonscan.Object(b, func(key, v []byte) error {
		switch {
		case jsonscan.KeyIs(key, "state_dirs"):
			return countMembers(v, "state_dirs", &owners, MaxOwners, func(_, dir []byte) error {
				return checkName("a state dir", dir)
			})
		case jsonscan.KeyIs(key, "operators"):
			return countMembers(v, "operators", &operators, MaxOperators, func(_, val []byte) error {
				return addValue(&values, val)
			})
		case jsonscan.KeyIs(key, "source"):
			return countMembers(v, "source", &sources, MaxSourceEntries, func(_, val []byte) error {
				return addValue(&values, val)
			})
		case jsonscan.KeyIs(key, "txn_id"):
			return checkName("txn_id", v)
		}
		return nil
	})
}

// countMembers calls fn with every member of the record collection v (a
// JSON object) named what, adding their number to *n and refusing more
// than max in total (a key repeated in the record adds up) or a key
// longer than MaxNameBytes.
func countMembers(v []byte, what string, n *int, max int, fn func(key, value []byte) error) error {
	err := jsonscan.Object(v, func(key, val []byte) error {
		if *n++; *n > max {
			return overLimit("%s: more than %d entries", what, max)
		}
		if len(key) > MaxNameBytes {
			return overLimit("%s: a key of %d bytes, over the %d-byte limit", what, len(key), MaxNameBytes)
		}
		if fn == nil {
			return nil
		}
		return fn(key, val)
	})
	if errors.Is(err, jsonscan.ErrNotContainer) {
		return fmt.Errorf("%s is not an object", what)
	}
	return err
}

func checkName(what string, v []byte) error {
	if len(v) > MaxNameBytes+2 {
		return overLimit("%s of %d bytes, over the %d-byte limit", what, len(v)-2, MaxNameBytes)
	}
	return nil
}

func addValue(total *int, v []byte) error {
	if jsonscan.IsString(v) {
		*total += len(v) - 2
	}
	if *total > MaxValueBytes {
		return overLimit("operator and source values of more than %d bytes", MaxValueBytes)
	}
	return nil
}
