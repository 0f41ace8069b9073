package job_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/job"
	"github.com/tidemark-io/tidemark/state"
)

// source is a replayable source of the numbers 1…n, batch at a time. It
// records every offset it was sought to.
type source struct {
	n, batch int
	next     int
	seeks    []int
}

func (s *source) Seek(_ context.Context, off []byte) error {
	s.next = 0
	if off != nil {
		if err := json.Unmarshal(off, &s.next); err != nil {
			return err
		}
	}
	s.seeks = append(s.seeks, s.next)
	return nil
}

func (s *source) Next(ctx context.Context) ([]job.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.next >= s.n {
		return nil, io.EOF
	}
	var out []job.Record
	for range max(s.batch, 1) {
		if s.next == s.n {
			break
		}
		s.next++
		out = append(out, job.Record{Key: []byte(strconv.Itoa(s.next))})
	}
	return out, nil
}

func (s *source) Offsets() ([]byte, error) { return json.Marshal(s.next) }

// summer keeps a running total in the state and outputs each number
// with the total after it: a record's value tells whether the state
// counted every number before it exactly once. Its owner is "sum" unless
// set; pause, if set, slows each batch.
type summer struct {
	owner string
	pause time.Duration
}

func (s summer) Process(_ context.Context, st *state.Store, in []job.Record) ([]job.Record, error) {
	o, err := st.Owner(cmp.Or(s.owner, "sum"))
	if err != nil {
		return nil, err
	}
	v, _, err := o.Get([]byte("total"))
	if err != nil {
		return nil, err
	}
	total, _ := strconv.Atoi(string(v))
	out := make([]job.Record, len(in))
	for i, r := range in {
		n, _ := strconv.Atoi(string(r.Key))
		total += n
		out[i] = job.Record{Key: r.Key, Value: []byte(strconv.Itoa(total))}
	}
	time.Sleep(s.pause)
	return out, o.Set([]byte("total"), []byte(strconv.Itoa(total)))
}

// ledger is the durable side of contractSink, shared by every node: what
// an external transactional store would keep.
type ledger struct {
	mu        sync.Mutex
	prepared  map[job.Txn][]job.Record
	committed map[job.Txn]bool
	commits   int // Commit calls that made a transaction visible
}

func newLedger() *ledger {
	return &ledger{prepared: map[job.Txn][]job.Record{}, committed: map[job.Txn]bool{}}
}

// output returns the committed records in checkpoint order.
func (l *ledger) output() []job.Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	var txns []job.Txn
	for t := range l.committed {
		txns = append(txns, t)
	}
	slices.SortFunc(txns, func(a, b job.Txn) int { return cmp.Compare(a.String(), b.String()) })
	var out []job.Record
	for _, t := range txns {
		out = append(out, l.prepared[t]...)
	}
	return out
}

// contractSink is a Sink written only from the documented contract: a
// node-local buffer per transaction, made durable by Prepare and visible
// by an idempotent Commit keyed by the whole Txn. It knows nothing of the
// runtime's internals (no sweep): leftovers of dead writers stay.
type contractSink struct {
	l    *ledger
	mu   sync.Mutex
	open map[job.Txn][]job.Record
}

func (l *ledger) sink() *contractSink { return &contractSink{l: l, open: map[job.Txn][]job.Record{}} }

func (s *contractSink) Write(_ context.Context, txn job.Txn, recs []job.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open[txn] = append(s.open[txn], recs...)
	return nil
}

func (s *contractSink) Prepare(_ context.Context, txn job.Txn) error {
	s.mu.Lock()
	recs := s.open[txn]
	delete(s.open, txn)
	s.mu.Unlock()
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	if _, ok := s.l.prepared[txn]; ok {
		return fmt.Errorf("txn %s prepared twice", txn)
	}
	s.l.prepared[txn] = slices.Clone(recs)
	return nil
}

func (s *contractSink) Commit(_ context.Context, txn job.Txn) error {
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	if _, ok := s.l.prepared[txn]; !ok {
		return fmt.Errorf("commit of %s: not prepared", txn)
	}
	if !s.l.committed[txn] {
		s.l.committed[txn] = true
		s.l.commits++
	}
	return nil
}

func (s *contractSink) Abort(_ context.Context, txn job.Txn) error {
	s.mu.Lock()
	delete(s.open, txn)
	s.mu.Unlock()
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	if s.l.committed[txn] {
		return fmt.Errorf("abort of %s: committed", txn)
	}
	delete(s.l.prepared, txn)
	return nil
}

// checkExactlyOnce checks that out holds the numbers 1…n once each, in
// order, each with the running total: nothing lost, nothing twice, in
// the output or in the state.
func checkExactlyOnce(t *testing.T, out []job.Record, n int) {
	t.Helper()
	checkRange(t, out, 1, n)
}

// checkRange checks that out holds the numbers first…last once each, in
// order, each with the running total since 1.
func checkRange(t *testing.T, out []job.Record, first, last int) {
	t.Helper()
	if want := last - first + 1; len(out) != want {
		t.Errorf("output holds %d records, want %d (%d…%d)", len(out), want, first, last)
	}
	total := (first - 1) * first / 2
	for i, r := range out {
		n := first + i
		total += n
		if got, want := string(r.Key), strconv.Itoa(n); got != want {
			t.Fatalf("output record %d is %s, want %s (lost or duplicated output)", i, got, want)
		}
		if got, want := string(r.Value), strconv.Itoa(total); got != want {
			t.Fatalf("record %s carries total %s, want %s (the state lost or double-counted)", r.Key, got, want)
		}
	}
}

// node is one node of a job: a disk and a Storage on the shared bucket.
func node(t testing.TB, bucket blobstore.Blobstore, disk string) *blobstorage.Storage {
	t.Helper()
	return blobstorage.New(bucket, filepath.Join(disk, "checkpoints"), blobstorage.Options{})
}

// smallState keeps Pebble's memory small for tests.
var smallState = state.Options{MemTableSize: 256 << 10, CacheSize: 1 << 20}
