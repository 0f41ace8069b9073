package job_test

import (
	"bytes"
	"context"
	"iter"
	"strings"
	"sync"
	"testing"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/memstore"
	"github.com/tidemark-io/tidemark/filestore"
	"github.com/tidemark-io/tidemark/job"
	"github.com/tidemark-io/tidemark/job/jobtest"
)

// stores are the Blobstores the BlobSink tests run on.
func stores(t *testing.T) map[string]blobstore.Blobstore {
	fs, err := filestore.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return map[string]blobstore.Blobstore{"memstore": memstore.New(), "filestore": fs}
}

func recs(keys ...string) []job.Record {
	var out []job.Record
	for _, k := range keys {
		out = append(out, job.Record{Key: []byte(k), Value: []byte("v" + k)})
	}
	return out
}

func keys(out []job.Record) string {
	var b strings.Builder
	for _, r := range out {
		b.WriteString(string(r.Key) + " ")
	}
	return strings.TrimSpace(b.String())
}

// Commit is idempotent from any node, concurrently too: a retried, a
// recovering and a zombie commit of one transaction all succeed and the
// output holds it once. Nothing is visible before the commit.
func TestBlobSinkCommitIsIdempotent(t *testing.T) {
	for name, bs := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			s := job.NewBlobSink(bs, "out/")
			txn := job.Txn{ID: "ckpt-00000000000000000001", Writer: "e1"}
			if err := s.Write(ctx, txn, recs("a", "b")); err != nil {
				t.Fatal(err)
			}
			if err := s.Write(ctx, txn, recs("c")); err != nil {
				t.Fatal(err)
			}
			if err := s.Prepare(ctx, txn); err != nil {
				t.Fatal(err)
			}
			if got := jobtest.BlobOutput(t, s); len(got) != 0 {
				t.Fatalf("visible before commit: %v", keys(got))
			}
			var wg sync.WaitGroup
			errs := make([]error, 4)
			for i := range errs {
				wg.Go(func() { errs[i] = job.NewBlobSink(bs, "out/").Commit(ctx, txn) })
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Errorf("commit %d: %v", i, err)
				}
			}
			if err := s.Commit(ctx, txn); err != nil {
				t.Errorf("retried commit: %v", err)
			}
			if got := keys(jobtest.BlobOutput(t, s)); got != "a b c" {
				t.Errorf("output %q, want a b c", got)
			}
		})
	}
}

// A commit under another writer of an id already committed is never
// taken as this transaction's: it fails and changes nothing. A commit of
// a transaction never prepared fails.
func TestBlobSinkCommitOfAnotherWriterFails(t *testing.T) {
	ctx := t.Context()
	bs := memstore.New()
	s := job.NewBlobSink(bs, "")
	id := "ckpt-00000000000000000007"
	for _, w := range []string{"e1", "e2"} {
		if err := s.Write(ctx, job.Txn{ID: id, Writer: w}, recs(w)); err != nil {
			t.Fatal(err)
		}
		if err := s.Prepare(ctx, job.Txn{ID: id, Writer: w}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Commit(ctx, job.Txn{ID: id, Writer: "e2"}); err != nil {
		t.Fatal(err)
	}
	err := s.Commit(ctx, job.Txn{ID: id, Writer: "e1"})
	if err == nil || !strings.Contains(err.Error(), "not this transaction") {
		t.Errorf("commit of e1 after e2's: %v, want a refusal", err)
	}
	if got := keys(jobtest.BlobOutput(t, s)); got != "e2" {
		t.Errorf("output %q, want e2 only", got)
	}
	if err := s.Commit(ctx, job.Txn{ID: "ckpt-00000000000000000008", Writer: "e2"}); err == nil {
		t.Error("commit of a transaction never prepared: no error")
	}
}

// The recovery sweep drops the transactions no commit names, keeps the
// committed ones and those of newer writers, and reports the greatest id
// it saw. A prepared, empty transaction commits to nothing.
func TestBlobSinkSweep(t *testing.T) {
	ctx := t.Context()
	bs := memstore.New()
	s := job.NewBlobSink(bs, "out/")
	id := func(n string) string { return "ckpt-0000000000000000000" + n }
	prep := func(n, w string) job.Txn {
		txn := job.Txn{ID: id(n), Writer: w}
		if err := s.Write(ctx, txn, recs(n+w)); err != nil {
			t.Fatal(err)
		}
		if err := s.Prepare(ctx, txn); err != nil {
			t.Fatal(err)
		}
		return txn
	}
	if err := s.Commit(ctx, prep("1", "e1")); err != nil {
		t.Fatal(err)
	}
	prep("1", "e2") // a zombie's staging of a committed id
	prep("2", "e2") // a dead writer's, never committed
	prep("3", "e9") // a newer writer's: not ours to drop
	empty := job.Txn{ID: id("4"), Writer: "e5"}
	if err := s.Prepare(ctx, empty); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, empty); err != nil {
		t.Fatal(err)
	}
	last, err := s.Sweep(ctx, "e5")
	if err != nil {
		t.Fatal(err)
	}
	if last != id("4") {
		t.Errorf("sweep saw %s last, want %s", last, id("4"))
	}
	var left []string
	for info, err := range bs.List(ctx, "out/txn/") {
		if err != nil {
			t.Fatal(err)
		}
		left = append(left, strings.TrimPrefix(info.Key, "out/txn/"))
	}
	want := []string{id("1") + "@e1", id("3") + "@e9", id("4") + "@e5"}
	if strings.Join(left, " ") != strings.Join(want, " ") {
		t.Errorf("after sweep: %v, want %v", left, want)
	}
	if got := keys(jobtest.BlobOutput(t, s)); got != "1e1" {
		t.Errorf("output %q, want 1e1", got)
	}
}

// Output refuses a committed object whose bytes are not the ones the
// commit names, and records of any bytes round-trip.
func TestBlobSinkOutputChecksDigest(t *testing.T) {
	ctx := t.Context()
	bs := memstore.New()
	s := job.NewBlobSink(bs, "")
	txn := job.Txn{ID: "ckpt-00000000000000000001", Writer: "e1"}
	odd := []job.Record{{}, {Key: []byte{0, 1, 2}, Value: bytes.Repeat([]byte{0xff}, 70000)}}
	if err := s.Write(ctx, txn, odd); err != nil {
		t.Fatal(err)
	}
	if err := s.Prepare(ctx, txn); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, txn); err != nil {
		t.Fatal(err)
	}
	got := jobtest.BlobOutput(t, s)
	if len(got) != 2 || len(got[0].Key)+len(got[0].Value) != 0 || !bytes.Equal(got[1].Value, odd[1].Value) {
		t.Fatalf("round trip: %d records", len(got))
	}
	if err := bs.Put(ctx, "txn/"+txn.String(), bytes.NewReader([]byte{1, 'x', 0})); err != nil {
		t.Fatal(err)
	}
	var last error
	for _, err := range s.Output(ctx) {
		last = err
	}
	if last == nil || !strings.Contains(last.Error(), "sha256") {
		t.Errorf("output of a tampered object: %v, want a digest error", last)
	}
}

// laggingList is a store whose listings of commits lag: they miss the
// commits made after it was told to lag (an eventually consistent list).
type laggingList struct {
	blobstore.Blobstore
	hide map[string]bool
}

func (l *laggingList) List(ctx context.Context, prefix string) iter.Seq2[blobstore.ObjectInfo, error] {
	return func(yield func(blobstore.ObjectInfo, error) bool) {
		for info, err := range l.Blobstore.List(ctx, prefix) {
			if err == nil && l.hide[info.Key] {
				continue
			}
			if !yield(info, err) {
				return
			}
		}
	}
}

// The sweep keeps a committed transaction whose commit a lagging listing
// did not show: the simulation (integration/sim, runtime seed 1) found it
// deleting committed output so.
func TestBlobSinkSweepKeepsACommitTheListingMissed(t *testing.T) {
	ctx := t.Context()
	mem := memstore.New()
	bs := &laggingList{Blobstore: mem, hide: map[string]bool{}}
	s := job.NewBlobSink(bs, "out/")
	txn := job.Txn{ID: "ckpt-00000000000000000001", Writer: "e1"}
	if err := s.Write(ctx, txn, recs("1")); err != nil {
		t.Fatal(err)
	}
	if err := s.Prepare(ctx, txn); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, txn); err != nil {
		t.Fatal(err)
	}
	bs.hide["out/commit/"+txn.ID] = true
	if _, err := s.Sweep(ctx, "e2"); err != nil {
		t.Fatal(err)
	}
	if got := keys(jobtest.BlobOutput(t, job.NewBlobSink(mem, "out/"))); got != "1" {
		t.Errorf("output after the sweep %q, want 1", got)
	}
}
