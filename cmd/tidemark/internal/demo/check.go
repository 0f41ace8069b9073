package demo

import (
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
	// Abandoned is the number of committed transactions left out: those
	// of lineages abandoned by a rollback to a savepoint on this store,
	// whose output the checked lineage produced again (see Lineage).
	Abandoned int
	// OutputDiff and StateDiff list the words whose committed output
	// (sum over committed transactions) or state count differs from the
	// expected count, as "word: got N, want M", at most ten each; their
	// lengths are OutputWrong and StateWrong.
	OutputDiff, StateDiff   []string
	OutputWrong, StateWrong int
	// OutputTotal is the sum of every committed count: Records -
	// Base.Offset when no record was lost or doubled.
	OutputTotal uint64
	// Base says which records the committed output of this store must
	// hold: [Base.Offset, Records). It is the zero Base (every record)
	// unless the job was resumed here from a savepoint restored out of
	// another store, whose sink holds the output before it. The state is
	// always compared with every record.
	Base Base
	// Lineage is the history of the checked output: which committed
	// transactions are its own (see Lineage).
	Lineage Lineage
}

// OK reports whether every count is exact in both output and state.
func (c Check) OK() bool { return c.OutputWrong == 0 && c.StateWrong == 0 }

// String says what the check found, in one line.
func (c Check) String() string {
	from := ""
	if c.Base.FromSavepoint() {
		from = fmt.Sprintf(" (output in this store from record %d: resumed from a savepoint)", c.Base.Offset)
	}
	abandoned := ""
	switch {
	case c.Abandoned > 0 && c.Lineage.StartedAt() != "":
		abandoned = fmt.Sprintf("%d more of the job before this one or of a lineage abandoned by a rollback to a savepoint, not counted", c.Abandoned)
	case c.Abandoned > 0:
		abandoned = fmt.Sprintf("%d more of a lineage abandoned by a rollback to a savepoint, not counted", c.Abandoned)
	}
	if c.OK() {
		txns := plural(c.Transactions, "committed transaction")
		if abandoned != "" {
			txns += "; " + abandoned
		}
		return fmt.Sprintf("exactly-once: OK, %s%s, %s (%s)",
			plural(c.Records, "record"), from, plural(c.Words, "word"), txns)
	}
	var b strings.Builder
	if c.Base.FromSavepoint() {
		fmt.Fprintf(&b, "exactly-once: FAILED, %s expected in this store's output%s, %d in the committed output",
			plural(c.Records-min(c.Base.Offset, c.Records), "record"), from, c.OutputTotal)
	} else {
		fmt.Fprintf(&b, "exactly-once: FAILED, %s expected, %d in the committed output", plural(c.Records, "record"), c.OutputTotal)
	}
	if abandoned != "" {
		fmt.Fprintf(&b, " (%s, %s)", plural(c.Transactions, "committed transaction"), abandoned)
	}
	if c.OutputWrong > 0 {
		fmt.Fprintf(&b, "; %s wrong in the output (%s)", plural(c.OutputWrong, "word"), strings.Join(c.OutputDiff, ", "))
	}
	if c.StateWrong > 0 {
		fmt.Fprintf(&b, "; %s wrong in the state (%s)", plural(c.StateWrong, "word"), strings.Join(c.StateDiff, ", "))
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

// checkExactlyOnce recomputes the expected counts from src and compares
// out, the committed output of lineage lin (every transaction, unless the
// job was rolled back to a savepoint on this store: see Lineage), with
// the counts of records [base.Offset, Records) (the output committed in
// this store), and got, the state's counts (nil: not compared), with the
// counts of every record. A lost record shows as a count too small, a
// record applied twice as one too large.
func checkExactlyOnce(src *Source, out Output, got map[string]uint64, base Base, lin Lineage) Check {
	want := src.Expected()
	wantOut := want
	if base.Offset > 0 {
		wantOut = src.ExpectedRange(base.Offset, src.Records())
	}
	c := Check{Records: src.Records(), Words: len(want), Transactions: out.Committed, Abandoned: out.Abandoned, Base: base, Lineage: lin}
	for _, n := range out.Counts {
		c.OutputTotal += n
	}
	c.OutputDiff, c.OutputWrong = diff(out.Counts, wantOut)
	if got != nil {
		c.StateDiff, c.StateWrong = diff(got, want)
	}
	return c
}
