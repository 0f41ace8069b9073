package demo

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
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
	// StagedPrefix holds the open transactions: StagedPrefix+<id>@<writer>
	// is the output of checkpoint <id> as staged by one writer, written
	// before the checkpoint is persisted as prepared. The writer part
	// makes the transaction's identity unique per writer: two nodes that
	// both believe they own checkpoint <id> (a cut-off zombie and the node
	// that replaced it) stage different objects and can never commit each
	// other's bytes.
	StagedPrefix = "sink/staged/"
	// OutPrefix holds the decided transactions: OutPrefix+<id> exists once
	// the transaction of checkpoint <id> is committed or aborted, and its
	// first line says which (and, for a commit, exactly which staged
	// object it committed: its key and SHA-256).
	OutPrefix = "sink/out/"
)

// writerSep separates the checkpoint id from the writer in a staged key.
// Ids made by checkpoint.NewID never contain it, and writers never do, so
// the last one in a key is the separator.
const writerSep = "@"

// First words of an OutPrefix object. The header line is
//
//	committed <id> <staged key> sha256:<hex digest of the body>
//	aborted <id> <writer>
//
// followed, for a commit, by the staged bytes. A header of only
// "committed <id>" or "aborted <id>" (written before staged objects were
// per writer) is still read.
const (
	committedHeader = "committed "
	abortedHeader   = "aborted "
	digestPrefix    = "sha256:"
)

// Sink errors.
var (
	// ErrTxnAborted is returned (wrapped) by Commit for a transaction
	// that was aborted first (by recovery on another node, for example).
	ErrTxnAborted = errors.New("demo: sink transaction already aborted")
	// ErrTxnCommitted is returned (wrapped) by Abort for a transaction
	// that was committed first.
	ErrTxnCommitted = errors.New("demo: sink transaction already committed")
	// ErrTxnOtherWriter is returned (wrapped) by Commit when the
	// transaction of the id was committed with another writer's staged
	// output, and by Committed when the committed output of a checkpoint
	// was staged by another writer than the one that persisted the
	// checkpoint. Either means two writers used the same checkpoint id;
	// the output committed is not this writer's.
	ErrTxnOtherWriter = errors.New("demo: sink transaction committed by another writer")
	// ErrCorruptOutput is returned (wrapped) for sink objects that cannot
	// be parsed, or whose body does not match the digest in their header.
	ErrCorruptOutput = errors.New("demo: corrupt sink output")
)

// Sink is a transactional file sink with one transaction per checkpoint.
// The files live in a Blobstore (a directory tree with the file:// store,
// a bucket with s3://), next to the job's checkpoints, so that any node
// that can resume the job can also prove what its predecessor committed.
//
//   - Stage writes the checkpoint's output to StagedPrefix+<id>@<writer>:
//     the open transaction of this writer. Put is atomic, so a crash
//     leaves it whole or absent, and only this writer ever writes that
//     key.
//   - Commit "renames it into place": it reads its own staged object and
//     creates OutPrefix+<id> with a header naming that object (key and
//     SHA-256) followed by the staged bytes, with PutIfAbsent. That single
//     conditional create is the commit point; the object is written
//     temp → fsync → rename → fsync dir by filestore, and appears
//     atomically on S3.
//   - Abort creates the same key with an "aborted" header, also with
//     PutIfAbsent, and removes this writer's staged object.
//
// Because commit and abort race for one create-if-absent key, exactly one
// of them wins, and the outcome is durable and visible to every node.
// Committed uses that: asked whether a transaction committed, it first
// tries to abort it. If the abort wins, the answer is a durable "no" that
// no late commit (a zombie that was cut off between persisting prepared
// and committing) can turn into a "yes" after recovery has restored an
// older checkpoint and decided to replay that output.
//
// Because the staged object is per writer and the commit names it, a
// commit can only ever commit the bytes its own writer staged: a zombie
// that stages the same checkpoint id as its replacement, even between
// the replacement's stage and its commit, writes another object, which
// no commit of the replacement reads. Such leftovers are removed by
// Sweep.
//
// A Sink is safe for concurrent use.
type Sink struct {
	bs blobstore.Blobstore
	// writer names this sink's transactions in staged keys and headers:
	// random per NewSink, or "e<epoch>" once a Run took the writer role
	// (epochs are unique per Acquire).
	writer string
}

// NewSink returns a sink storing its files in bs. Its transactions are
// named by a random writer id, unique to this Sink; Run renames them by
// the writer epoch it acquires (see Config.Storage).
func NewSink(bs blobstore.Blobstore) *Sink {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return &Sink{bs: bs, writer: "w" + hex.EncodeToString(b[:])}
}

// withEpoch returns a sink on the same store whose transactions are named
// by writer epoch epoch, or s itself when epoch is 0 (no writer role).
func (s *Sink) withEpoch(epoch uint64) *Sink {
	if epoch == 0 {
		return s
	}
	return &Sink{bs: s.bs, writer: fmt.Sprintf("e%d", epoch)}
}

// Writer returns the writer id that names this sink's transactions.
func (s *Sink) Writer() string { return s.writer }

// StagedKey returns the key of the open transaction of checkpoint id
// staged by writer.
func StagedKey(id, writer string) string { return StagedPrefix + id + writerSep + writer }

// parseStagedKey splits a staged key into checkpoint id and writer
// (writer "" for a key that names none, which no Sink writes).
func parseStagedKey(key string) (id, writer string) {
	rest := strings.TrimPrefix(key, StagedPrefix)
	if i := strings.LastIndex(rest, writerSep); i >= 0 {
		return rest[:i], rest[i+len(writerSep):]
	}
	return rest, ""
}

// encodeDeltas writes word counts as "word\tcount" lines in word order.
func encodeDeltas(w *bytes.Buffer, deltas map[string]uint64) {
	for _, word := range slices.Sorted(maps.Keys(deltas)) {
		fmt.Fprintf(w, "%s\t%d\n", word, deltas[word])
	}
}

// Stage writes the output of checkpoint id (counts to add, per word) as
// this writer's open transaction, replacing any earlier staging of the
// same id by this writer. Another writer's staging of the same id is a
// separate object and is left alone.
func (s *Sink) Stage(ctx context.Context, id string, deltas map[string]uint64) error {
	if err := checkpoint.ValidateID(id); err != nil {
		return fmt.Errorf("demo: sink stage: %w", err)
	}
	var buf bytes.Buffer
	encodeDeltas(&buf, deltas)
	if err := s.bs.Put(ctx, StagedKey(id, s.writer), &buf); err != nil {
		return fmt.Errorf("demo: sink stage %q: %w", id, err)
	}
	return nil
}

// decision is the outcome of a transaction, as its OutPrefix header says.
type decision struct {
	decided, committed bool
	// staged and digest name the staged object a commit committed; writer
	// is the writer of a commit (from staged) or of an abort.
	staged, digest, writer string
}

// committedBy reports whether d is a commit of exactly the staged object
// key with digest sum.
func (d decision) committedBy(key, sum string) bool {
	return d.committed && d.staged == key && d.digest == sum
}

// commitHeader is the header line of the commit of id with the staged
// object key whose content has digest sum.
func commitHeader(id, key, sum string) string {
	return committedHeader + id + " " + key + " " + sum + "\n"
}

// digest returns the digest of b as written in headers.
func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return digestPrefix + hex.EncodeToString(sum[:])
}

// parseHeader parses the header line (without its newline) of the
// OutPrefix object of id.
func parseHeader(id, line string) (decision, error) {
	bad := func() (decision, error) {
		return decision{}, fmt.Errorf("%w: %s%s: header %q", ErrCorruptOutput, OutPrefix, id, line)
	}
	if rest, ok := strings.CutPrefix(line, abortedHeader+id+" "); ok {
		if rest == "" || strings.Contains(rest, " ") {
			return bad()
		}
		return decision{decided: true, writer: rest}, nil
	}
	rest, ok := strings.CutPrefix(line, committedHeader+id)
	if !ok {
		return bad()
	}
	// " <staged key> sha256:<hex>": the key is StagedPrefix+id+"@"+writer.
	i := strings.LastIndex(rest, " ")
	key, sum := strings.TrimPrefix(rest[:max(i, 0)], " "), rest[i+1:]
	kid, writer := parseStagedKey(key)
	if i <= 0 || !strings.HasPrefix(rest, " "+StagedPrefix) || kid != id || writer == "" ||
		!strings.HasPrefix(sum, digestPrefix) || len(sum) != len(digestPrefix)+2*sha256.Size {
		return bad()
	}
	return decision{decided: true, committed: true, staged: key, digest: sum, writer: writer}, nil
}

// Commit commits this writer's transaction of checkpoint id: the output
// it staged becomes part of the committed output, once. Committing an
// already committed transaction succeeds (a retried commit) if it was
// committed with this writer's staged output; committing an aborted one
// fails with ErrTxnAborted, and one committed with another writer's
// output fails with ErrTxnOtherWriter.
func (s *Sink) Commit(ctx context.Context, id string) error {
	if err := checkpoint.ValidateID(id); err != nil {
		return fmt.Errorf("demo: sink commit: %w", err)
	}
	key := StagedKey(id, s.writer)
	staged, err := s.readAll(ctx, key)
	if errors.Is(err, blobstore.ErrNotFound) {
		// Either a retry after the commit removed the staged file, or a
		// transaction that was never staged: the outcome says which.
		d, oerr := s.outcome(ctx, id)
		switch {
		case oerr != nil:
			return fmt.Errorf("demo: sink commit %q: %w", id, oerr)
		case d.committed && d.staged == key:
			return nil
		case d.committed || d.decided:
			return s.lostDecision(id, key, d)
		}
		return fmt.Errorf("demo: sink commit %q: nothing staged: %w", id, err)
	}
	if err != nil {
		return fmt.Errorf("demo: sink commit %q: %w", id, err)
	}
	// The header names the object read and the digest of the bytes read,
	// so the commit point commits exactly these bytes, whatever else is
	// staged for id by anyone.
	sum := digest(staged)
	body := append([]byte(commitHeader(id, key, sum)), staged...)
	if _, err := s.bs.PutIfAbsent(ctx, OutPrefix+id, bytes.NewReader(body)); err != nil {
		if !errors.Is(err, blobstore.ErrPreconditionFailed) {
			return fmt.Errorf("demo: sink commit %q: %w", id, err)
		}
		// Decided before: by our own earlier attempt (a retry), by an
		// abort that won, or by another writer's commit of the same id.
		d, oerr := s.outcome(ctx, id)
		switch {
		case oerr != nil:
			return fmt.Errorf("demo: sink commit %q: %w", id, oerr)
		case d.committedBy(key, sum):
		default:
			return s.lostDecision(id, key, d)
		}
	}
	// The staged file is garbage now; a failure to remove it only leaves
	// it for Sweep.
	_ = s.bs.Delete(ctx, key)
	return nil
}

// lostDecision is the error of a Commit of id whose transaction another
// decision ended first. A decision by another writer (a commit of its own
// staged output, or an abort) means that writer took over: this one is a
// zombie woken in its commit phase, and the error wraps checkpoint.ErrFenced
// so that it says so.
func (s *Sink) lostDecision(id, key string, d decision) error {
	base := ErrTxnAborted
	what := "aborted"
	if d.committed {
		base, what = ErrTxnOtherWriter, fmt.Sprintf("committed %q, not ours %q", d.staged, key)
	}
	if d.writer != "" && d.writer != s.writer {
		return fmt.Errorf("demo: sink commit %q: %s by writer %s, which took over: %w: %w", id, what, d.writer, base, checkpoint.ErrFenced)
	}
	return fmt.Errorf("demo: sink commit %q: %s: %w", id, what, base)
}

// Abort aborts the transaction of checkpoint id: no output staged for it
// becomes visible, and no later Commit of id, by any writer, can succeed.
// It removes this writer's staged output (other writers' staged objects
// of id are left to Sweep). Aborting an aborted (or never staged)
// transaction succeeds; aborting a committed one fails with
// ErrTxnCommitted.
//
// The decision is per id, not per writer: a writer that lost the writer
// role must not abort (the Coordinator does not abort on
// checkpoint.ErrFenced), or it would abort its replacement's transaction
// of the same id.
func (s *Sink) Abort(ctx context.Context, id string) error {
	if err := checkpoint.ValidateID(id); err != nil {
		return fmt.Errorf("demo: sink abort: %w", err)
	}
	if _, err := s.decideAborted(ctx, id); err != nil {
		return fmt.Errorf("demo: sink abort %q: %w", id, err)
	}
	if err := s.bs.Delete(ctx, StagedKey(id, s.writer)); err != nil {
		return fmt.Errorf("demo: sink abort %q: %w", id, err)
	}
	return nil
}

// decideAborted records the abort of id unless it is already decided. It
// returns the decision: an abort, or a commit and an error wrapping
// ErrTxnCommitted.
func (s *Sink) decideAborted(ctx context.Context, id string) (decision, error) {
	_, err := s.bs.PutIfAbsent(ctx, OutPrefix+id, strings.NewReader(abortedHeader+id+" "+s.writer+"\n"))
	if err == nil {
		return decision{decided: true, writer: s.writer}, nil
	}
	if !errors.Is(err, blobstore.ErrPreconditionFailed) {
		return decision{}, err
	}
	d, err := s.outcome(ctx, id)
	if err != nil {
		return decision{}, err
	}
	if d.committed {
		return d, ErrTxnCommitted
	}
	return d, nil
}

// Committed reports whether the transaction of cp committed. It is the
// checkpoint.CommittedFunc of this sink. An undecided transaction is
// decided here, as aborted, so that "no" is final: see the type
// documentation.
//
// When both the checkpoint and the commit name their writer (see
// TxnIDOf), they must be the same one: a commit of another writer's
// output under cp's id is not cp's output, and promoting cp over it would
// break exactly-once, so Committed fails with ErrTxnOtherWriter instead
// of answering.
func (s *Sink) Committed(ctx context.Context, cp *checkpoint.CheckpointData) (bool, error) {
	d, err := s.decideAborted(ctx, cp.ID)
	if errors.Is(err, ErrTxnCommitted) {
		if w, ok := writerOfTxnID(cp.TxnID); ok && d.writer != "" && d.writer != w {
			return false, fmt.Errorf("demo: sink committed %q: checkpoint of writer %q, output committed by %q: %w",
				cp.ID, w, d.writer, ErrTxnOtherWriter)
		}
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("demo: sink committed %q: %w", cp.ID, err)
	}
	return false, nil
}

// TxnIDOf returns the transactional id Run records in the checkpoints of
// a writer: TxnID@<writer>. It ties a checkpoint to the staged object its
// commit must have committed.
func TxnIDOf(writer string) string { return TxnID + writerSep + writer }

// writerOfTxnID returns the writer of a transactional id made by TxnIDOf.
func writerOfTxnID(txnID string) (string, bool) {
	w, ok := strings.CutPrefix(txnID, TxnID+writerSep)
	return w, ok && w != ""
}

// outcome reads the decision of id: decided is false when there is none.
func (s *Sink) outcome(ctx context.Context, id string) (decision, error) {
	rc, err := s.bs.Get(ctx, OutPrefix+id)
	if errors.Is(err, blobstore.ErrNotFound) {
		return decision{}, nil
	}
	if err != nil {
		return decision{}, err
	}
	defer rc.Close()
	line, err := bufio.NewReader(rc).ReadString('\n')
	if err != nil {
		return decision{}, fmt.Errorf("%w: %s%s: %v", ErrCorruptOutput, OutPrefix, id, err)
	}
	return parseHeader(id, strings.TrimSuffix(line, "\n"))
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
	// Committed and Aborted count the decided transactions. Committed
	// counts only those summed in Counts.
	Committed, Aborted int
	// Abandoned counts the committed transactions OutputOf left out: those
	// of lineages abandoned by a rollback (see Lineage), whose output the
	// lineage asked about produced again.
	Abandoned int
	// Staged counts staged objects: open transactions, and leftovers of
	// decided ones (another writer's staging of an id, a crash before the
	// staged object was removed) that Sweep removes.
	Staged int
	// LastID is the greatest checkpoint id the sink has seen, staged or
	// decided ("" when none).
	LastID string
}

// Output reads every decided transaction and sums the committed ones.
// The body of a commit must match the digest its header names: what is
// summed is exactly the staged output that was committed.
func (s *Sink) Output(ctx context.Context) (Output, error) {
	return s.OutputOf(ctx, nil)
}

// OutputOf is Output for the output of one lineage of the job: the
// committed transactions lin does not include (see Lineage.Includes) are
// counted in Abandoned, not summed (their digest is still checked). A
// nil or one-segment lin includes every transaction.
func (s *Sink) OutputOf(ctx context.Context, lin Lineage) (Output, error) {
	out := Output{Counts: map[string]uint64{}}
	for info, err := range s.bs.List(ctx, OutPrefix) {
		if err != nil {
			return Output{}, fmt.Errorf("demo: sink output: %w", err)
		}
		id := strings.TrimPrefix(info.Key, OutPrefix)
		if err := s.addCommitted(ctx, id, &out, !lin.Includes(id)); errors.Is(err, blobstore.ErrNotFound) {
			// Listed but not there to read: removed since the listing,
			// or a write the store never completed (MinIO below its
			// write quorum leaves such an object listed, unreadable,
			// until it heals). No reader can see it: it holds no output.
			continue
		} else if err != nil {
			return Output{}, fmt.Errorf("demo: sink output: %w", err)
		}
		out.LastID = max(out.LastID, id)
	}
	for info, err := range s.bs.List(ctx, StagedPrefix) {
		if err != nil {
			return Output{}, fmt.Errorf("demo: sink output: %w", err)
		}
		out.Staged++
		id, _ := parseStagedKey(info.Key)
		out.LastID = max(out.LastID, id)
	}
	return out, nil
}

// addCommitted reads the decided transaction id and, if committed, adds
// it to out: summed, or only counted in Abandoned when abandoned.
func (s *Sink) addCommitted(ctx context.Context, id string, out *Output, abandoned bool) error {
	raw, err := s.readAll(ctx, OutPrefix+id)
	if err != nil {
		return err
	}
	line, body, ok := bytes.Cut(raw, []byte("\n"))
	if !ok {
		return fmt.Errorf("%w: %s%s: no header line", ErrCorruptOutput, OutPrefix, id)
	}
	d, err := parseHeader(id, string(line))
	if err != nil {
		return err
	}
	if !d.committed {
		out.Aborted++
		return nil
	}
	if d.digest != "" && digest(body) != d.digest {
		return fmt.Errorf("%w: %s%s: body does not match the digest of %s", ErrCorruptOutput, OutPrefix, id, d.staged)
	}
	if abandoned {
		out.Abandoned++
		return nil
	}
	out.Committed++
	for l := range strings.Lines(string(body)) {
		word, n, ok := strings.Cut(strings.TrimSuffix(l, "\n"), "\t")
		c, err := strconv.ParseUint(n, 10, 64)
		if !ok || err != nil {
			return fmt.Errorf("%w: %s%s: line %q", ErrCorruptOutput, OutPrefix, id, l)
		}
		out.Counts[word] += c
	}
	return nil
}

// Sweep removes every staged object, whichever writer staged it, after
// deciding its transaction: an undecided one (a crash between staging
// and the prepared record) is aborted; a decided one (its staged object
// not yet removed after the commit or abort, or another writer's staging
// of an id that was decided without it) is left decided as it is. Run it
// after recovery, before the first new checkpoint: no staged object can
// belong to a transaction that may still commit, because recovery has
// decided the only prepared checkpoint there can be, and a writer that
// lost the writer role is fenced before it persists another. It returns
// the number of staged objects removed.
func (s *Sink) Sweep(ctx context.Context) (int, error) {
	var keys []string
	for info, err := range s.bs.List(ctx, StagedPrefix) {
		if err != nil {
			return 0, fmt.Errorf("demo: sink sweep: %w", err)
		}
		keys = append(keys, info.Key)
	}
	n := 0
	for _, key := range keys {
		id, _ := parseStagedKey(key)
		if checkpoint.ValidateID(id) != nil {
			continue // not ours
		}
		if _, err := s.decideAborted(ctx, id); err != nil && !errors.Is(err, ErrTxnCommitted) {
			return n, fmt.Errorf("demo: sink sweep %q: %w", id, err)
		}
		if err := s.bs.Delete(ctx, key); err != nil {
			return n, fmt.Errorf("demo: sink sweep %q: %w", id, err)
		}
		n++
	}
	return n, nil
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
		d, err := s.outcome(ctx, got)
		if err != nil {
			return false, fmt.Errorf("demo: sink committed through %q: %w", id, err)
		}
		if d.committed {
			return true, nil
		}
	}
	return false, nil
}

// LastID returns the greatest checkpoint id the sink has a file for,
// staged (by any writer) or decided, or "" when it has none. A job never
// reuses such an id for a new transaction.
func (s *Sink) LastID(ctx context.Context) (string, error) {
	last := ""
	for info, err := range s.bs.List(ctx, OutPrefix) {
		if err != nil {
			return "", fmt.Errorf("demo: sink last id: %w", err)
		}
		last = max(last, strings.TrimPrefix(info.Key, OutPrefix))
	}
	for info, err := range s.bs.List(ctx, StagedPrefix) {
		if err != nil {
			return "", fmt.Errorf("demo: sink last id: %w", err)
		}
		id, _ := parseStagedKey(info.Key)
		last = max(last, id)
	}
	return last, nil
}

// stringsReader returns a reader over s.
func stringsReader(s string) io.Reader { return strings.NewReader(s) }
