package demo

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
)

// Sink key layout, under the Blobstore the sink is given:
const (
	// StagedPrefix holds the open transactions: StagedPrefix+<id> is the
	// output of checkpoint <id>, written before the checkpoint is
	// persisted as prepared.
	StagedPrefix = "sink/staged/"
	// OutPrefix holds the decided transactions: OutPrefix+<id> exists once
	// the transaction of checkpoint <id> is committed or aborted, and its
	// first line says which.
	OutPrefix = "sink/out/"
)

// First lines of an OutPrefix object.
const (
	committedHeader = "committed "
	abortedHeader   = "aborted "
)

// Sink errors.
var (
	// ErrTxnAborted is returned (wrapped) by Commit for a transaction
	// that was aborted first (by recovery on another node, for example).
	ErrTxnAborted = errors.New("demo: sink transaction already aborted")
	// ErrTxnCommitted is returned (wrapped) by Abort for a transaction
	// that was committed first.
	ErrTxnCommitted = errors.New("demo: sink transaction already committed")
	// ErrCorruptOutput is returned (wrapped) for sink objects that cannot
	// be parsed.
	ErrCorruptOutput = errors.New("demo: corrupt sink output")
)

// Sink is a transactional file sink with one transaction per checkpoint.
// The files live in a Blobstore (a directory tree with the file:// store,
// a bucket with s3://), next to the job's checkpoints, so that any node
// that can resume the job can also prove what its predecessor committed.
//
//   - Stage writes the checkpoint's output to StagedPrefix+<id>: the open
//     transaction. Put is atomic, so a crash leaves it whole or absent.
//   - Commit "renames it into place": it creates OutPrefix+<id> with a
//     "committed" header and the staged content, with PutIfAbsent. That
//     single conditional create is the commit point; the object is
//     written temp → fsync → rename → fsync dir by filestore, and appears
//     atomically on S3.
//   - Abort creates the same key with an "aborted" header, also with
//     PutIfAbsent, and removes the staged file.
//
// Because commit and abort race for one create-if-absent key, exactly one
// of them wins, and the outcome is durable and visible to every node.
// Committed uses that: asked whether a transaction committed, it first
// tries to abort it. If the abort wins, the answer is a durable "no" that
// no late commit (a zombie that was cut off between persisting prepared
// and committing) can turn into a "yes" after recovery has restored an
// older checkpoint and decided to replay that output.
//
// A Sink is safe for concurrent use.
type Sink struct {
	bs blobstore.Blobstore
}

// NewSink returns a sink storing its files in bs.
func NewSink(bs blobstore.Blobstore) *Sink { return &Sink{bs: bs} }

// encodeDeltas writes word counts as "word\tcount" lines in word order.
func encodeDeltas(w *bytes.Buffer, deltas map[string]uint64) {
	for _, word := range slices.Sorted(maps.Keys(deltas)) {
		fmt.Fprintf(w, "%s\t%d\n", word, deltas[word])
	}
}

// Stage writes the output of checkpoint id (counts to add, per word) as
// its open transaction, replacing any earlier staging of the same id.
func (s *Sink) Stage(ctx context.Context, id string, deltas map[string]uint64) error {
	if err := checkpoint.ValidateID(id); err != nil {
		return fmt.Errorf("demo: sink stage: %w", err)
	}
	var buf bytes.Buffer
	encodeDeltas(&buf, deltas)
	if err := s.bs.Put(ctx, StagedPrefix+id, &buf); err != nil {
		return fmt.Errorf("demo: sink stage %q: %w", id, err)
	}
	return nil
}

// Commit commits the transaction of checkpoint id: its staged output
// becomes part of the committed output, once. Committing an already
// committed transaction succeeds (a retried commit); committing an
// aborted one fails with ErrTxnAborted.
func (s *Sink) Commit(ctx context.Context, id string) error {
	if err := checkpoint.ValidateID(id); err != nil {
		return fmt.Errorf("demo: sink commit: %w", err)
	}
	staged, err := s.readAll(ctx, StagedPrefix+id)
	if errors.Is(err, blobstore.ErrNotFound) {
		// Either a retry after the commit removed the staged file, or a
		// transaction that was never staged: the outcome says which.
		committed, decided, oerr := s.outcome(ctx, id)
		switch {
		case oerr != nil:
			return fmt.Errorf("demo: sink commit %q: %w", id, oerr)
		case decided && committed:
			return nil
		case decided:
			return fmt.Errorf("demo: sink commit %q: %w", id, ErrTxnAborted)
		}
		return fmt.Errorf("demo: sink commit %q: nothing staged: %w", id, err)
	}
	if err != nil {
		return fmt.Errorf("demo: sink commit %q: %w", id, err)
	}
	body := append([]byte(committedHeader+id+"\n"), staged...)
	if _, err := s.bs.PutIfAbsent(ctx, OutPrefix+id, bytes.NewReader(body)); err != nil {
		if !errors.Is(err, blobstore.ErrPreconditionFailed) {
			return fmt.Errorf("demo: sink commit %q: %w", id, err)
		}
		// Decided before: by our own earlier attempt (a retry), or by an
		// abort that won.
		committed, _, oerr := s.outcome(ctx, id)
		if oerr != nil {
			return fmt.Errorf("demo: sink commit %q: %w", id, oerr)
		}
		if !committed {
			return fmt.Errorf("demo: sink commit %q: %w", id, ErrTxnAborted)
		}
	}
	// The staged file is garbage now; a failure to remove it only leaves
	// it for Sweep.
	_ = s.bs.Delete(ctx, StagedPrefix+id)
	return nil
}

// Abort aborts the transaction of checkpoint id: its staged output never
// becomes visible, and no later Commit of id can succeed. Aborting an
// aborted (or never staged) transaction succeeds; aborting a committed
// one fails with ErrTxnCommitted.
func (s *Sink) Abort(ctx context.Context, id string) error {
	if err := checkpoint.ValidateID(id); err != nil {
		return fmt.Errorf("demo: sink abort: %w", err)
	}
	if _, err := s.decideAborted(ctx, id); err != nil {
		return fmt.Errorf("demo: sink abort %q: %w", id, err)
	}
	if err := s.bs.Delete(ctx, StagedPrefix+id); err != nil {
		return fmt.Errorf("demo: sink abort %q: %w", id, err)
	}
	return nil
}

// decideAborted records the abort of id unless it is already decided. It
// returns whether the transaction is aborted (false: it had committed,
// and the error wraps ErrTxnCommitted).
func (s *Sink) decideAborted(ctx context.Context, id string) (bool, error) {
	_, err := s.bs.PutIfAbsent(ctx, OutPrefix+id, strings.NewReader(abortedHeader+id+"\n"))
	if err == nil {
		return true, nil
	}
	if !errors.Is(err, blobstore.ErrPreconditionFailed) {
		return false, err
	}
	committed, _, err := s.outcome(ctx, id)
	if err != nil {
		return false, err
	}
	if committed {
		return false, ErrTxnCommitted
	}
	return true, nil
}

// Committed reports whether the transaction of cp committed. It is the
// checkpoint.CommittedFunc of this sink. An undecided transaction is
// decided here, as aborted, so that "no" is final: see the type
// documentation.
func (s *Sink) Committed(ctx context.Context, cp *checkpoint.CheckpointData) (bool, error) {
	aborted, err := s.decideAborted(ctx, cp.ID)
	if errors.Is(err, ErrTxnCommitted) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("demo: sink committed %q: %w", cp.ID, err)
	}
	return !aborted, nil
}

// outcome reads the decision of id: decided is false when there is none.
func (s *Sink) outcome(ctx context.Context, id string) (committed, decided bool, err error) {
	rc, err := s.bs.Get(ctx, OutPrefix+id)
	if errors.Is(err, blobstore.ErrNotFound) {
		return false, false, nil
	}
	if err != nil {
		return false, false, err
	}
	defer rc.Close()
	line, err := bufio.NewReader(rc).ReadString('\n')
	if err != nil {
		return false, false, fmt.Errorf("%w: %s%s: %v", ErrCorruptOutput, OutPrefix, id, err)
	}
	switch line {
	case committedHeader + id + "\n":
		return true, true, nil
	case abortedHeader + id + "\n":
		return false, true, nil
	}
	return false, false, fmt.Errorf("%w: %s%s: header %q", ErrCorruptOutput, OutPrefix, id, line)
}

func (s *Sink) readAll(ctx context.Context, key string) ([]byte, error) {
	rc, err := s.bs.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// Output is the committed output of a sink.
type Output struct {
	// Counts is the sum, per word, over every committed transaction.
	Counts map[string]uint64
	// Committed and Aborted count the decided transactions.
	Committed, Aborted int
	// Staged counts open (undecided) transactions.
	Staged int
	// LastID is the greatest checkpoint id the sink has seen, staged or
	// decided ("" when none).
	LastID string
}

// Output reads every decided transaction and sums the committed ones.
func (s *Sink) Output(ctx context.Context) (Output, error) {
	out := Output{Counts: map[string]uint64{}}
	for info, err := range s.bs.List(ctx, OutPrefix) {
		if err != nil {
			return Output{}, fmt.Errorf("demo: sink output: %w", err)
		}
		id := strings.TrimPrefix(info.Key, OutPrefix)
		out.LastID = max(out.LastID, id)
		if err := s.addCommitted(ctx, id, &out); err != nil {
			return Output{}, fmt.Errorf("demo: sink output: %w", err)
		}
	}
	for info, err := range s.bs.List(ctx, StagedPrefix) {
		if err != nil {
			return Output{}, fmt.Errorf("demo: sink output: %w", err)
		}
		out.Staged++
		out.LastID = max(out.LastID, strings.TrimPrefix(info.Key, StagedPrefix))
	}
	return out, nil
}

func (s *Sink) addCommitted(ctx context.Context, id string, out *Output) error {
	rc, err := s.bs.Get(ctx, OutPrefix+id)
	if err != nil {
		return err
	}
	defer rc.Close()
	sc := bufio.NewScanner(rc)
	if !sc.Scan() {
		return fmt.Errorf("%w: %s%s: empty", ErrCorruptOutput, OutPrefix, id)
	}
	switch sc.Text() {
	case abortedHeader + id:
		out.Aborted++
		return nil
	case committedHeader + id:
		out.Committed++
	default:
		return fmt.Errorf("%w: %s%s: header %q", ErrCorruptOutput, OutPrefix, id, sc.Text())
	}
	for sc.Scan() {
		word, n, ok := strings.Cut(sc.Text(), "\t")
		c, err := strconv.ParseUint(n, 10, 64)
		if !ok || err != nil {
			return fmt.Errorf("%w: %s%s: line %q", ErrCorruptOutput, OutPrefix, id, sc.Text())
		}
		out.Counts[word] += c
	}
	return sc.Err()
}

// Sweep aborts every open transaction: staged files whose checkpoint was
// never persisted (a crash between staging and the prepared record), or
// whose commit was decided but whose staged file was not yet removed. Run
// it after recovery, before the first new checkpoint: no staged file can
// belong to a transaction that may still commit, because recovery has
// decided the only prepared checkpoint there can be, and a writer that
// lost the writer role is fenced before it persists another.
func (s *Sink) Sweep(ctx context.Context) (int, error) {
	var ids []string
	for info, err := range s.bs.List(ctx, StagedPrefix) {
		if err != nil {
			return 0, fmt.Errorf("demo: sink sweep: %w", err)
		}
		ids = append(ids, strings.TrimPrefix(info.Key, StagedPrefix))
	}
	for _, id := range ids {
		if checkpoint.ValidateID(id) != nil {
			continue // not ours
		}
		err := s.Abort(ctx, id)
		if errors.Is(err, ErrTxnCommitted) {
			err = s.bs.Delete(ctx, StagedPrefix+id)
		}
		if err != nil {
			return 0, fmt.Errorf("demo: sink sweep: %w", err)
		}
	}
	return len(ids), nil
}

// CommittedThrough reports whether the sink holds a committed
// transaction of a checkpoint whose id is at or below id (ids sort in
// creation order). Aborted transactions are not output and do not count.
func (s *Sink) CommittedThrough(ctx context.Context, id string) (bool, error) {
	for info, err := range s.bs.List(ctx, OutPrefix) {
		if err != nil {
			return false, fmt.Errorf("demo: sink committed through %q: %w", id, err)
		}
		got := strings.TrimPrefix(info.Key, OutPrefix)
		if got > id {
			return false, nil // listed in order: nothing further is at or below id
		}
		if checkpoint.ValidateID(got) != nil {
			continue // not ours
		}
		committed, _, err := s.outcome(ctx, got)
		if err != nil {
			return false, fmt.Errorf("demo: sink committed through %q: %w", id, err)
		}
		if committed {
			return true, nil
		}
	}
	return false, nil
}

// LastID returns the greatest checkpoint id the sink has a file for,
// staged or decided, or "" when it has none. A job never reuses such an
// id for a new transaction.
func (s *Sink) LastID(ctx context.Context) (string, error) {
	last := ""
	for _, prefix := range []string{OutPrefix, StagedPrefix} {
		for info, err := range s.bs.List(ctx, prefix) {
			if err != nil {
				return "", fmt.Errorf("demo: sink last id: %w", err)
			}
			last = max(last, strings.TrimPrefix(info.Key, prefix))
		}
	}
	return last, nil
}

// stringsReader returns a reader over s.
func stringsReader(s string) io.Reader { return strings.NewReader(s) }
