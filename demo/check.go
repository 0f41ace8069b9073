package demo

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Check is the result of the exactly-once check: the committed output and
// the state compared with the counts computed from the source.
type Check struct {
	// Records is the number of records of the source, Words the number of
	// distinct words in it.
	Records uint64
	Words   int
	// Transactions is the number of committed sink transactions summed.
	Transactions int
	// OutputDiff and StateDiff list the words whose committed output
	// (sum over committed transactions) or state count differs from the
	// expected count, as "word: got N, want M", at most ten each; their
	// lengths are OutputWrong and StateWrong.
	OutputDiff, StateDiff   []string
	OutputWrong, StateWrong int
	// OutputTotal is the sum of every committed count: Records when no
	// record was lost or doubled.
	OutputTotal uint64
}

// OK reports whether every count is exact in both output and state.
func (c Check) OK() bool { return c.OutputWrong == 0 && c.StateWrong == 0 }

// String says what the check found, in one line.
func (c Check) String() string {
	if c.OK() {
		return fmt.Sprintf("exactly-once: OK, %d records, %d words (%d committed transactions)",
			c.Records, c.Words, c.Transactions)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "exactly-once: FAILED, %d records expected, %d in the committed output", c.Records, c.OutputTotal)
	if c.OutputWrong > 0 {
		fmt.Fprintf(&b, "; %d words wrong in the output (%s)", c.OutputWrong, strings.Join(c.OutputDiff, ", "))
	}
	if c.StateWrong > 0 {
		fmt.Fprintf(&b, "; %d words wrong in the state (%s)", c.StateWrong, strings.Join(c.StateDiff, ", "))
	}
	return b.String()
}

// diff compares got with want and returns the differing words (at most
// ten of them, described) and how many there are.
func diff(got, want map[string]uint64) ([]string, int) {
	keys := map[string]bool{}
	for k := range got {
		keys[k] = true
	}
	for k := range want {
		keys[k] = true
	}
	var out []string
	n := 0
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if got[k] != want[k] {
			n++
			if len(out) < 10 {
				out = append(out, fmt.Sprintf("%s: got %d, want %d", k, got[k], want[k]))
			}
		}
	}
	return out, n
}

// CheckExactlyOnce recomputes the expected counts from src and compares
// them with the sum over the sink's committed transactions, and with the
// state when cnt is not nil. A lost record shows as a count too small, a
// record applied twice as one too large. The error is about reading; a
// mismatch is reported in the Check.
func CheckExactlyOnce(ctx context.Context, src *Source, sink *Sink, cnt *counts) (Check, error) {
	want := src.Expected()
	out, err := sink.Output(ctx)
	if err != nil {
		return Check{}, err
	}
	c := Check{Records: src.Records(), Words: len(want), Transactions: out.Committed}
	for _, n := range out.Counts {
		c.OutputTotal += n
	}
	c.OutputDiff, c.OutputWrong = diff(out.Counts, want)
	if cnt != nil {
		got, err := cnt.all()
		if err != nil {
			return Check{}, err
		}
		c.StateDiff, c.StateWrong = diff(got, want)
	}
	return c, nil
}
