package integration

// GC run by an operator (no writer role) in a loop beside a live writer
// on a real S3 server, with a grace period far shorter than a save: only
// the protocol (docs/gc.md) keeps the writer's unfinished work. The writer
// saves prepared-then-completed checkpoints whose tables are shared the
// way Pebble's are, and is never fenced; every checkpoint retention keeps
// restores byte-exact.

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/integration/miniotest"
)

func gcBesideALiveWriter(t *testing.T, srv *miniotest.Server) {
	ctx := t.Context()
	bs := openBucket(t, srv, srv.NewBucket(t))
	const keep, n = 2, 12
	w := acquiredWriter(t, bs, blobstorage.Options{Keep: 100})
	epoch := w.Epoch()
	stop := make(chan struct{})
	gcDone := make(chan error, 1)
	var runs, deleted atomic.Int64
	go func() {
		op := blobstorage.New(bs, "", blobstorage.Options{Keep: keep, Grace: time.Millisecond})
		for {
			select {
			case <-stop:
				gcDone <- nil
				return
			default:
			}
			rep, err := op.GC(ctx, blobstorage.GCOptions{})
			if err != nil {
				gcDone <- err
				return
			}
			runs.Add(1)
			deleted.Add(int64(rep.Objects))
		}
	}()
	want := map[string]map[string]string{} // id → rel → content
	live := map[string]string{}            // table → id whose state dir holds it
	for i := 1; i <= n; i++ {
		id := checkpoint.NewID(uint64(i))
		dir := filepath.Join(w.StateDir(id), "op")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if i%4 == 0 {
			clear(live) // a compaction: older tables leave the state
		}
		files := map[string]string{"MANIFEST": fmt.Sprintf("manifest %d", i)}
		for table, from := range live {
			if err := os.Link(filepath.Join(w.StateDir(from), "op", table), filepath.Join(dir, table)); err != nil {
				t.Fatal(err)
			}
			files[table] = want[from][table]
		}
		table := fmt.Sprintf("%06d.sst", i)
		files[table] = fmt.Sprintf("table %d", i)
		for rel, c := range map[string]string{table: files[table], "MANIFEST": files["MANIFEST"]} {
			if err := os.WriteFile(filepath.Join(dir, rel), []byte(c), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		live[table] = id
		want[id] = files
		d := completedRecord(id, map[string]string{"op": "op"})
		d.Status = checkpoint.StatusPrepared
		if err := w.Save(ctx, d); err != nil {
			t.Fatalf("Save(%s) prepared beside an operator's GC: %v", id, err)
		}
		if err := w.UpdateStatus(ctx, id, checkpoint.StatusCompleted); err != nil {
			t.Fatalf("UpdateStatus(%s) beside an operator's GC: %v", id, err)
		}
	}
	close(stop)
	if err := <-gcDone; err != nil {
		t.Fatalf("operator's GC beside the writer: %v", err)
	}
	if runs.Load() < 3 || deleted.Load() == 0 {
		t.Fatalf("%d GC runs deleted %d objects: the test proves nothing", runs.Load(), deleted.Load())
	}
	t.Logf("%d GC runs beside the writer deleted %d objects", runs.Load(), deleted.Load())
	if err := w.CheckWriter(ctx); err != nil || w.Epoch() != epoch {
		t.Fatalf("the writer after the operator's GC: %v (epoch %d, was %d)", err, w.Epoch(), epoch)
	}
	if _, err := blobstorage.New(bs, "", blobstorage.Options{Keep: keep, Grace: time.Millisecond}).GC(ctx, blobstorage.GCOptions{}); err != nil {
		t.Fatal(err)
	}
	ids, err := blobstorage.New(bs, "", blobstorage.Options{}).IDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if wantIDs := []string{checkpoint.NewID(n - 1), checkpoint.NewID(n)}; !slices.Equal(ids, wantIDs) {
		t.Fatalf("records after GC: %v, want the newest %d: %v", ids, keep, wantIDs)
	}
	for _, id := range ids {
		dir := filepath.Join(restoreOnEmptyNode(t, bs, id), "op")
		for rel, c := range want[id] {
			if b, err := os.ReadFile(filepath.Join(dir, rel)); err != nil || string(b) != c {
				t.Fatalf("%s restored %s = %q, %v; want %q", id, rel, b, err, c)
			}
		}
	}
}

func TestGCBesideALiveWriterOnMinIO(t *testing.T) { gcBesideALiveWriter(t, miniotest.Shared(t)) }

func TestGCBesideALiveWriterOnVersityGW(t *testing.T) {
	gcBesideALiveWriter(t, miniotest.SharedVersity(t))
}
