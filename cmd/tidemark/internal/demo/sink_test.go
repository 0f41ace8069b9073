package demo

import (
	"context"
	"errors"
	"iter"
	"maps"
	"strings"
	"testing"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/filestore"
)

// newFileSink returns a sink on a filestore in a temp dir, and the store.
func newFileSink(t *testing.T) (*Sink, blobstore.Blobstore) {
	t.Helper()
	bs, err := filestore.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return NewSink(bs), bs
}

func output(t *testing.T, s *Sink) Output {
	t.Helper()
	out, err := s.Output(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var (
	id1 = checkpoint.NewID(1)
	id2 = checkpoint.NewID(2)
)

func TestSinkStagedOutputIsInvisibleUntilCommitted(t *testing.T) {
	ctx := t.Context()
	s, _ := newFileSink(t)
	if err := s.Stage(ctx, id1, map[string]uint64{"a": 2, "b": 1}); err != nil {
		t.Fatal(err)
	}
	if out := output(t, s); len(out.Counts) != 0 || out.Staged != 1 {
		t.Fatalf("before commit: %+v, want no counts and 1 staged", out)
	}
	if err := s.Commit(ctx, id1); err != nil {
		t.Fatal(err)
	}
	out := output(t, s)
	if want := map[string]uint64{"a": 2, "b": 1}; !maps.Equal(out.Counts, want) || out.Committed != 1 || out.Staged != 0 {
		t.Fatalf("after commit: %+v, want %v, 1 committed, 0 staged", out, want)
	}
}

func TestSinkCommitIsIdempotent(t *testing.T) {
	ctx := t.Context()
	s, _ := newFileSink(t)
	if err := s.Stage(ctx, id1, map[string]uint64{"a": 1}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := s.Commit(ctx, id1); err != nil {
			t.Fatalf("commit (retry): %v", err)
		}
	}
	if out := output(t, s); out.Counts["a"] != 1 || out.Committed != 1 {
		t.Fatalf("after two commits: %+v, want a=1 once", out)
	}
}

func TestSinkAbortRemovesTheStagedOutputAndForbidsCommit(t *testing.T) {
	ctx := t.Context()
	s, _ := newFileSink(t)
	if err := s.Stage(ctx, id1, map[string]uint64{"a": 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.Abort(ctx, id1); err != nil {
		t.Fatal(err)
	}
	if err := s.Abort(ctx, id1); err != nil {
		t.Fatalf("second abort: %v", err)
	}
	out := output(t, s)
	if len(out.Counts) != 0 || out.Aborted != 1 || out.Staged != 0 {
		t.Fatalf("after abort: %+v, want nothing visible, 1 aborted, 0 staged", out)
	}
	if err := s.Commit(ctx, id1); !errors.Is(err, ErrTxnAborted) {
		t.Fatalf("commit after abort: %v, want ErrTxnAborted", err)
	}
}

func TestSinkAbortAfterCommitFails(t *testing.T) {
	ctx := t.Context()
	s, _ := newFileSink(t)
	if err := s.Stage(ctx, id1, map[string]uint64{"a": 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, id1); err != nil {
		t.Fatal(err)
	}
	if err := s.Abort(ctx, id1); !errors.Is(err, ErrTxnCommitted) {
		t.Fatalf("abort after commit: %v, want ErrTxnCommitted", err)
	}
	if out := output(t, s); out.Counts["a"] != 1 {
		t.Fatalf("abort after commit changed the output: %+v", out)
	}
}

func TestSinkCommittedAnswersFromTheDurableOutcome(t *testing.T) {
	ctx := t.Context()
	s, bs := newFileSink(t)
	for _, id := range []string{id1, id2} {
		if err := s.Stage(ctx, id, map[string]uint64{"a": 1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Commit(ctx, id1); err != nil {
		t.Fatal(err)
	}
	// A second node (its own Sink on the same store) asks.
	other := NewSink(bs)
	if ok, err := other.Committed(ctx, &checkpoint.CheckpointData{ID: id1}); err != nil || !ok {
		t.Fatalf("Committed(committed txn) = %v, %v; want true", ok, err)
	}
	if ok, err := other.Committed(ctx, &checkpoint.CheckpointData{ID: id2}); err != nil || ok {
		t.Fatalf("Committed(open txn) = %v, %v; want false", ok, err)
	}
}

func TestSinkAZombieCannotCommitOnceRecoveryDecidedNo(t *testing.T) {
	ctx := t.Context()
	zombie, bs := newFileSink(t)
	if err := zombie.Stage(ctx, id1, map[string]uint64{"a": 1}); err != nil {
		t.Fatal(err)
	}
	// Recovery on another node decides id1 did not commit ...
	if ok, err := NewSink(bs).Committed(ctx, &checkpoint.CheckpointData{ID: id1}); err != nil || ok {
		t.Fatalf("Committed = %v, %v; want false", ok, err)
	}
	// ... so the zombie's late commit must fail, or the output would be
	// produced twice (once by it, once by the replay).
	if err := zombie.Commit(ctx, id1); !errors.Is(err, ErrTxnAborted) {
		t.Fatalf("zombie commit after recovery: %v, want ErrTxnAborted", err)
	}
	if out := output(t, zombie); len(out.Counts) != 0 {
		t.Fatalf("zombie output visible: %+v", out)
	}
}

func TestSinkSweepAbortsOpenTransactionsAndKeepsCommitted(t *testing.T) {
	ctx := t.Context()
	s, bs := newFileSink(t)
	for _, id := range []string{id1, id2} {
		if err := s.Stage(ctx, id, map[string]uint64{"a": 1}); err != nil {
			t.Fatal(err)
		}
	}
	// id1 committed but its staged file left behind (crash after the
	// commit point), id2 open.
	if _, err := bs.PutIfAbsent(ctx, OutPrefix+id1, stringsReader(commitHeader(id1, StagedKey(id1, s.Writer()), digest([]byte("a\t1\n")))+"a\t1\n")); err != nil {
		t.Fatal(err)
	}
	n, err := s.Sweep(ctx)
	if err != nil || n != 2 {
		t.Fatalf("Sweep = %d, %v; want 2, nil", n, err)
	}
	out := output(t, s)
	if out.Counts["a"] != 1 || out.Committed != 1 || out.Aborted != 1 || out.Staged != 0 {
		t.Fatalf("after sweep: %+v, want a=1, 1 committed, 1 aborted, 0 staged", out)
	}
	if last, err := s.LastID(ctx); err != nil || last != id2 {
		t.Fatalf("LastID = %q, %v; want %q", last, err, id2)
	}
}

func TestSinkRejectsCorruptOutput(t *testing.T) {
	ctx := t.Context()
	s, bs := newFileSink(t)
	if err := bs.Put(ctx, OutPrefix+id1, stringsReader(committedHeader+id1+"\na\tnot-a-number\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Output(ctx); !errors.Is(err, ErrCorruptOutput) {
		t.Fatalf("Output over a corrupt file: %v, want ErrCorruptOutput", err)
	}
}

// A zombie woken in its commit phase, after the writer that took over
// aborted (or committed) the same id, is told it was fenced, not only
// that the transaction was decided.
func TestSinkCommitAfterANewerWriterDecidedIsFenced(t *testing.T) {
	ctx := t.Context()
	_, bs := newFileSink(t)
	zombie, successor := NewSink(bs).withEpoch(1), NewSink(bs).withEpoch(2)
	if err := zombie.Stage(ctx, id1, map[string]uint64{"a": 1}); err != nil {
		t.Fatal(err)
	}
	if err := successor.Abort(ctx, id1); err != nil {
		t.Fatal(err)
	}
	err := zombie.Commit(ctx, id1)
	if !errors.Is(err, checkpoint.ErrFenced) || !errors.Is(err, ErrTxnAborted) {
		t.Fatalf("zombie commit after the successor's abort: %v, want ErrFenced and ErrTxnAborted", err)
	}
	// Its own abort, then its own commit: decided by itself, not fenced.
	if err := zombie.Stage(ctx, id2, map[string]uint64{"a": 1}); err != nil {
		t.Fatal(err)
	}
	if err := zombie.Abort(ctx, id2); err != nil {
		t.Fatal(err)
	}
	if err := zombie.Commit(ctx, id2); !errors.Is(err, ErrTxnAborted) || errors.Is(err, checkpoint.ErrFenced) {
		t.Fatalf("commit after its own abort: %v, want ErrTxnAborted without ErrFenced", err)
	}
}

// danglingStore lists one more key than it can read: the state MinIO
// leaves an object in whose write failed below its write quorum.
type danglingStore struct {
	blobstore.Blobstore
	key string
}

func (d danglingStore) List(ctx context.Context, prefix string) iter.Seq2[blobstore.ObjectInfo, error] {
	return func(yield func(blobstore.ObjectInfo, error) bool) {
		for info, err := range d.Blobstore.List(ctx, prefix) {
			if !yield(info, err) {
				return
			}
		}
		if strings.HasPrefix(d.key, prefix) {
			yield(blobstore.ObjectInfo{Key: d.key, Size: 1}, nil)
		}
	}
}

// TestSinkOutputSkipsAnObjectListedButNotReadable: the committed output
// is what a reader can read; a listed key whose Get finds nothing (a
// write the store never completed, or a delete since the listing) is not
// output and not an error.
func TestSinkOutputSkipsAnObjectListedButNotReadable(t *testing.T) {
	ctx := t.Context()
	s, bs := newFileSink(t)
	if err := s.Stage(ctx, id1, map[string]uint64{"a": 2}); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, id1); err != nil {
		t.Fatal(err)
	}
	want := output(t, s)
	got := output(t, NewSink(danglingStore{bs, OutPrefix + id2}))
	if !maps.Equal(got.Counts, want.Counts) || got.Committed != want.Committed || got.Aborted != want.Aborted || got.LastID != want.LastID {
		t.Fatalf("output with an unreadable listed object = %+v, want %+v", got, want)
	}
}
