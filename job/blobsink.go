package job

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
)

// BlobSink is the reference Sink: a transactional output on any
// Blobstore, one object per transaction. Keys, under its prefix:
//
//	txn/<id>@<writer>   the records of one transaction, put by Prepare
//	commit/<id>         the commit: "committed <id> <txn key> sha256:<hex>"
//
// Write appends to a temporary file in os.TempDir, unlinked at once
// where the OS allows (memory stays bounded, a crash leaves nothing), Prepare
// streams it into txn/<id>@<writer> with one atomic Put, and Commit is
// one create-if-absent of commit/<id> naming that object and its digest.
// The commit object is the commit point: a retried, recovering or zombie
// Commit of the same transaction finds it naming its own object and
// succeeds, changing nothing; one naming another writer's object is never
// taken as this transaction's. Output reads the committed records.
//
// At recovery the runtime discards the transactions of dead writers that
// no commit names: no prepared record can name them any more. A BlobSink
// is safe for concurrent use.
type BlobSink struct {
	bs     blobstore.Blobstore
	prefix string

	mu   sync.Mutex
	open map[Txn]*os.File // transactions written to, not yet prepared
}

// NewBlobSink returns a sink keeping its objects in bs under prefix (for
// example "out/"; it may be empty).
func NewBlobSink(bs blobstore.Blobstore, prefix string) *BlobSink {
	return &BlobSink{bs: bs, prefix: prefix, open: map[Txn]*os.File{}}
}

const (
	txnDir       = "txn/"
	commitDir    = "commit/"
	commitHeader = "committed "
	digestPrefix = "sha256:"
)

func (s *BlobSink) txnKey(t Txn) string { return s.prefix + txnDir + t.String() }

// Write appends recs to txn's temporary file.
func (s *BlobSink) Write(_ context.Context, txn Txn, recs []Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.open[txn]
	if f == nil {
		var err error
		if f, err = os.CreateTemp("", "tidemark-sink-*"); err != nil {
			return fmt.Errorf("job: blob sink write %s: %w", txn, err)
		}
		// Unlinked at once where the OS allows: a crash leaves nothing.
		_ = os.Remove(f.Name())
		s.open[txn] = f
	}
	w := bufio.NewWriter(f)
	for _, rec := range recs {
		writeRecord(w, rec)
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("job: blob sink write %s: %w", txn, err)
	}
	return nil
}

// Prepare puts txn's records (none if it was never written) into its
// object, atomically and durably, and removes the temporary file.
func (s *BlobSink) Prepare(ctx context.Context, txn Txn) error {
	if err := checkpoint.ValidateID(txn.ID); err != nil {
		return fmt.Errorf("job: blob sink prepare: %w", err)
	}
	s.mu.Lock()
	f := s.open[txn]
	delete(s.open, txn)
	s.mu.Unlock()
	var r io.Reader = strings.NewReader("")
	if f != nil {
		defer discard(f)
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return fmt.Errorf("job: blob sink prepare %s: %w", txn, err)
		}
		r = f
	}
	if err := s.bs.Put(ctx, s.txnKey(txn), r); err != nil {
		return fmt.Errorf("job: blob sink prepare %s: %w", txn, err)
	}
	return nil
}

// Abort drops txn's temporary file and object, if any.
func (s *BlobSink) Abort(ctx context.Context, txn Txn) error {
	s.mu.Lock()
	f := s.open[txn]
	delete(s.open, txn)
	s.mu.Unlock()
	if f != nil {
		discard(f)
	}
	if err := s.bs.Delete(ctx, s.txnKey(txn)); err != nil {
		return fmt.Errorf("job: blob sink abort %s: %w", txn, err)
	}
	return nil
}

func discard(f *os.File) {
	_ = f.Close()
	_ = os.Remove(f.Name())
}

// Commit creates commit/<id> naming txn's object, unless it exists: then
// it succeeds if it names txn's object, and fails otherwise.
func (s *BlobSink) Commit(ctx context.Context, txn Txn) error {
	if err := checkpoint.ValidateID(txn.ID); err != nil {
		return fmt.Errorf("job: blob sink commit: %w", err)
	}
	key := s.txnKey(txn)
	if d, ok, err := s.commitOf(ctx, txn.ID); err != nil {
		return fmt.Errorf("job: blob sink commit %s: %w", txn, err)
	} else if ok {
		return s.ours(txn, key, d)
	}
	rc, err := s.bs.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("job: blob sink commit %s: read prepared output: %w", txn, err)
	}
	h := sha256.New()
	_, err = io.Copy(h, rc)
	_ = rc.Close()
	if err != nil {
		return fmt.Errorf("job: blob sink commit %s: read prepared output: %w", txn, err)
	}
	header := commitHeader + txn.ID + " " + key + " " + digestPrefix + hex.EncodeToString(h.Sum(nil)) + "\n"
	_, err = s.bs.PutIfAbsent(ctx, s.prefix+commitDir+txn.ID, strings.NewReader(header))
	if errors.Is(err, blobstore.ErrPreconditionFailed) {
		// A concurrent commit: ours from another node, or another's.
		d, ok, err := s.commitOf(ctx, txn.ID)
		if err != nil || !ok {
			return fmt.Errorf("job: blob sink commit %s: reread commit: %v", txn, err)
		}
		return s.ours(txn, key, d)
	}
	if err != nil {
		return fmt.Errorf("job: blob sink commit %s: %w", txn, err)
	}
	return nil
}

// ours accepts a commit of id that names key.
func (s *BlobSink) ours(txn Txn, key string, d commitRef) error {
	if d.key != key {
		return fmt.Errorf("job: blob sink commit %s: checkpoint %s was committed with %q, not this transaction", txn, txn.ID, d.key)
	}
	return nil
}

// commitRef is what commit/<id> says.
type commitRef struct{ key, digest string }

// commitOf reads commit/<id>; ok is false when there is none.
func (s *BlobSink) commitOf(ctx context.Context, id string) (commitRef, bool, error) {
	rc, err := s.bs.Get(ctx, s.prefix+commitDir+id)
	if errors.Is(err, blobstore.ErrNotFound) {
		return commitRef{}, false, nil
	}
	if err != nil {
		return commitRef{}, false, err
	}
	defer rc.Close()
	line, err := bufio.NewReader(io.LimitReader(rc, 4096)).ReadString('\n')
	if err != nil {
		return commitRef{}, false, fmt.Errorf("commit of %s: unreadable header: %w", id, err)
	}
	f := strings.Fields(line)
	if len(f) != 4 || f[0] != strings.TrimSpace(commitHeader) || f[1] != id || !strings.HasPrefix(f[3], digestPrefix) {
		return commitRef{}, false, fmt.Errorf("commit of %s: bad header %q", id, strings.TrimSpace(line))
	}
	return commitRef{key: f[2], digest: strings.TrimPrefix(f[3], digestPrefix)}, true, nil
}

// Output yields the committed records, transaction by transaction in
// checkpoint order, each in the order written. A transaction whose
// object does not match the digest its commit names ends the sequence
// with an error after its records.
func (s *BlobSink) Output(ctx context.Context) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		var ids []string
		for info, err := range s.bs.List(ctx, s.prefix+commitDir) {
			if err != nil {
				yield(Record{}, fmt.Errorf("job: blob sink output: %w", err))
				return
			}
			ids = append(ids, strings.TrimPrefix(info.Key, s.prefix+commitDir))
		}
		for _, id := range ids {
			d, ok, err := s.commitOf(ctx, id)
			if err == nil && !ok {
				err = fmt.Errorf("commit of %s vanished", id)
			}
			if err == nil && !s.readTxn(ctx, d, yield, &err) {
				return
			}
			if err != nil {
				yield(Record{}, fmt.Errorf("job: blob sink output: %w", err))
				return
			}
		}
	}
}

// readTxn yields the records of one committed object; false means stop.
func (s *BlobSink) readTxn(ctx context.Context, d commitRef, yield func(Record, error) bool, errp *error) bool {
	rc, err := s.bs.Get(ctx, d.key)
	if err != nil {
		*errp = fmt.Errorf("committed %s: %w", d.key, err)
		return true
	}
	defer rc.Close()
	h := sha256.New()
	br := bufio.NewReader(io.TeeReader(rc, h))
	for {
		rec, err := readRecord(br)
		if err == io.EOF {
			break
		}
		if err != nil {
			*errp = fmt.Errorf("committed %s: %w", d.key, err)
			return true
		}
		if !yield(rec, nil) {
			return false
		}
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != d.digest {
		*errp = fmt.Errorf("committed %s: sha256 %s, the commit names %s", d.key, got, d.digest)
	}
	return true
}

// sweep implements sweeper: it deletes every transaction object no
// commit names, except those of writers newer than writer (a writer that
// fenced this one owns them). Called after recovery committed the only
// prepared record there can be, it never deletes what a record names.
// It costs two listings, and a GET only for an id staged more than once.
func (s *BlobSink) sweep(ctx context.Context, _, writer string) (string, error) {
	// Open transactions of an earlier run in this process are dead too.
	s.mu.Lock()
	for t, f := range s.open {
		if t.Writer != writer {
			discard(f)
			delete(s.open, t)
		}
	}
	s.mu.Unlock()
	last := ""
	committed := map[string]bool{}
	for info, err := range s.bs.List(ctx, s.prefix+commitDir) {
		if err != nil {
			return "", fmt.Errorf("job: blob sink sweep: %w", err)
		}
		id := strings.TrimPrefix(info.Key, s.prefix+commitDir)
		committed[id] = true
		last = max(last, id)
	}
	byID := map[string][]string{} // id → its transaction objects' keys
	var order []string
	for info, err := range s.bs.List(ctx, s.prefix+txnDir) {
		if err != nil {
			return "", fmt.Errorf("job: blob sink sweep: %w", err)
		}
		id, _ := splitTxn(strings.TrimPrefix(info.Key, s.prefix+txnDir))
		if byID[id] == nil {
			order = append(order, id)
		}
		byID[id] = append(byID[id], info.Key)
		last = max(last, id)
	}
	for _, id := range order {
		keep := ""
		if committed[id] && len(byID[id]) == 1 {
			continue // the object its commit names, which is never deleted
		}
		if committed[id] {
			d, ok, err := s.commitOf(ctx, id)
			if err != nil || !ok {
				return "", fmt.Errorf("job: blob sink sweep %s: %v", id, err)
			}
			keep = d.key
		}
		for _, key := range byID[id] {
			_, w := splitTxn(strings.TrimPrefix(key, s.prefix+txnDir))
			if key == keep || newerWriter(w, writer) {
				continue
			}
			if err := s.bs.Delete(ctx, key); err != nil {
				return "", fmt.Errorf("job: blob sink sweep %s: %w", key, err)
			}
		}
	}
	return last, nil
}

// splitTxn splits "<id>@<writer>" (Txn.String).
func splitTxn(s string) (id, writer string) {
	if i := strings.LastIndex(s, "@"); i >= 0 {
		return s[:i], s[i+1:]
	}
	return s, ""
}

// newerWriter reports whether writer w has a greater epoch than ours.
func newerWriter(w, ours string) bool {
	a, errA := strconv.ParseUint(strings.TrimPrefix(w, "e"), 10, 64)
	b, errB := strconv.ParseUint(strings.TrimPrefix(ours, "e"), 10, 64)
	return strings.HasPrefix(w, "e") && strings.HasPrefix(ours, "e") && errA == nil && errB == nil && a > b
}

// writeRecord appends rec as uvarint(len key) key uvarint(len value) value.
func writeRecord(w *bufio.Writer, rec Record) {
	var n [binary.MaxVarintLen64]byte
	_, _ = w.Write(n[:binary.PutUvarint(n[:], uint64(len(rec.Key)))])
	_, _ = w.Write(rec.Key)
	_, _ = w.Write(n[:binary.PutUvarint(n[:], uint64(len(rec.Value)))])
	_, _ = w.Write(rec.Value)
}

// readRecord reads one record written by writeRecord; io.EOF at a clean end.
func readRecord(r *bufio.Reader) (Record, error) {
	field := func(first bool) ([]byte, error) {
		n, err := binary.ReadUvarint(r)
		if err == io.EOF && first {
			return nil, io.EOF
		}
		if err != nil {
			return nil, fmt.Errorf("truncated record: %w", io.ErrUnexpectedEOF)
		}
		if n > 1<<30 {
			return nil, fmt.Errorf("record field of %d bytes", n)
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, fmt.Errorf("truncated record: %w", io.ErrUnexpectedEOF)
		}
		return b, nil
	}
	k, err := field(true)
	if err != nil {
		return Record{}, err
	}
	v, err := field(false)
	return Record{Key: k, Value: v}, err
}

var _ Sink = (*BlobSink)(nil)
var _ sweeper = (*BlobSink)(nil)
