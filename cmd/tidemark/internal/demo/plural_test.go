package demo

import "testing"

// The check's verdict says a count of one in the singular.
func TestCheckStringSaysOneInTheSingular(t *testing.T) {
	got := Check{Records: 1, Words: 1, Transactions: 1, OutputTotal: 1}.String()
	if want := "exactly-once: OK, 1 record, 1 word (1 committed transaction)"; got != want {
		t.Fatalf("check: %q, want %q", got, want)
	}
	got = Check{Records: 2, Words: 2, Transactions: 2, OutputTotal: 2}.String()
	if want := "exactly-once: OK, 2 records, 2 words (2 committed transactions)"; got != want {
		t.Fatalf("check: %q, want %q", got, want)
	}
}
