package blobstorage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
)

// Races of a GC run by another process (no writer role) beside a live
// writer, each made deterministic by a hook that runs the writer's step at
// the worst moment of the GC. Each runs as a dry run and as a real run: a
// dry run reports exactly what a real run deletes, so both must spare what
// the writer needs.

// stepStore runs a hook once, the first time a listing of prefix ends
// (after the store's answer is complete, before the caller sees it), or
// before the first write of key: the other process's step between two of
// GC's.
type stepStore struct {
	blobstore.Blobstore
	mu     sync.Mutex
	onList map[string]func()
	onPut  map[string]func()
}

func newStepStore(bs blobstore.Blobstore) *stepStore {
	return &stepStore{Blobstore: bs, onList: map[string]func(){}, onPut: map[string]func(){}}
}

func (s *stepStore) Unwrap() blobstore.Blobstore { return s.Blobstore }

func (s *stepStore) take(m map[string]func(), key string) func() {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := m[key]
	delete(m, key)
	return f
}

func (s *stepStore) List(ctx context.Context, prefix string) iter.Seq2[blobstore.ObjectInfo, error] {
	return func(yield func(blobstore.ObjectInfo, error) bool) {
		var got []blobstore.ObjectInfo
		for o, err := range s.Blobstore.List(ctx, prefix) {
			if err != nil {
				yield(o, err)
				return
			}
			got = append(got, o)
		}
		if f := s.take(s.onList, prefix); f != nil {
			f()
		}
		for _, o := range got {
			if !yield(o, nil) {
				return
			}
		}
	}
}

func (s *stepStore) before(key string) {
	if f := s.take(s.onPut, key); f != nil {
		f()
	}
}

func (s *stepStore) Put(ctx context.Context, key string, r io.Reader) error {
	s.before(key)
	return s.Blobstore.Put(ctx, key, r)
}

func (s *stepStore) PutIfAbsent(ctx context.Context, key string, r io.Reader) (string, error) {
	s.before(key)
	return s.Blobstore.PutIfAbsent(ctx, key, r)
}

func (s *stepStore) PutIfMatch(ctx context.Context, key, etag string, r io.Reader) (string, error) {
	s.before(key)
	return s.Blobstore.PutIfMatch(ctx, key, etag, r)
}

// referencedBy returns every key the record of id references.
func referencedBy(t *testing.T, bs blobstore.Blobstore, id string) []string {
	t.Helper()
	rec, err := New(bs, "", Options{}).LoadRecord(t.Context(), id)
	if err != nil {
		t.Fatalf("record %s: %v", id, err)
	}
	var keys []string
	for _, files := range rec.Files {
		for _, f := range files {
			keys = append(keys, f.Key)
		}
	}
	return keys
}

// gcBeside runs an operator's GC (no Acquire) on bs, late enough that
// everything is older than Grace, and fails the test if it errs.
func gcBeside(t *testing.T, bs blobstore.Blobstore, keep int, dry bool) GCReport {
	t.Helper()
	rep, err := New(bs, "", Options{Keep: keep}).GC(t.Context(), GCOptions{DryRun: dry, Now: time.Now().Add(2 * time.Hour)})
	if err != nil {
		t.Fatalf("GC beside the writer (dry run %v): %v", dry, err)
	}
	return rep
}

// mustNotDelete fails if the report deletes one of keys.
func mustNotDelete(t *testing.T, rep GCReport, keys []string, why string) {
	t.Helper()
	for _, d := range rep.Deletions {
		if slices.Contains(keys, d.Key) {
			t.Errorf("GC deleted %s (%s), which %s", d.Key, d.Reason, why)
		}
	}
}

func bothRuns(t *testing.T, test func(t *testing.T, dry bool)) {
	for _, dry := range []bool{true, false} {
		name := "real run"
		if dry {
			name = "dry run"
		}
		t.Run(name, func(t *testing.T) { test(t, dry) })
	}
}

// The pointers were read after the listing: a checkpoint the writer saved
// meanwhile, reusing a table of the prepared checkpoint it abandoned, was
// not read, the prepared one looked abandoned, and its table was deleted
// under the new latest checkpoint.
func TestGCBesideAWriterKeepsTablesItsNextCheckpointReuses(t *testing.T) {
	bothRuns(t, func(t *testing.T, dry bool) {
		bs := newStepStore(newMem())
		w := newWriter(t, bs, Options{Keep: 5})
		id1, id2, id3 := checkpoint.NewID(1), checkpoint.NewID(2), checkpoint.NewID(3)
		saveState(t, w, id1, checkpoint.StatusCompleted, stateFiles{"a": {"000001.sst": "t1", "MANIFEST": "m1"}})
		saveState(t, w, id2, checkpoint.StatusPrepared, stateFiles{"a": {"000001.sst": "link:" + id1, "000002.sst": "t2", "MANIFEST": "m2"}})
		// Right after GC lists the checkpoints, the writer abandons 2 and
		// completes 3, which still holds 2's table.
		bs.onList[dirCheckpoints] = func() {
			saveState(t, w, id3, checkpoint.StatusCompleted, stateFiles{"a": {"000002.sst": "link:" + id2, "MANIFEST": "m3"}})
		}
		rep := gcBeside(t, bs, 1, dry)
		mustNotDelete(t, rep, referencedBy(t, bs, id3), "the latest completed checkpoint references")
		if !dry {
			restoreElsewhere(t, bs, id3)
		}
	})
}

// A record written while its pointers have not moved yet (the writer is
// between the two, or retrying the move) is newer than _latest; after the
// grace period GC called it a save that never completed and deleted it.
func TestGCBesideAWriterKeepsARecordWhosePointersHaveNotMovedYet(t *testing.T) {
	bothRuns(t, func(t *testing.T, dry bool) {
		bs := newStepStore(newMem())
		w := newWriter(t, bs, Options{Keep: 5})
		id1, id2 := checkpoint.NewID(1), checkpoint.NewID(2)
		saveState(t, w, id1, checkpoint.StatusCompleted, stateFiles{"a": {"000001.sst": "t1", "MANIFEST": "m1"}})
		var rep GCReport
		bs.onPut[keyLatest] = func() { rep = gcBeside(t, bs, 1, dry) }
		saveState(t, w, id2, checkpoint.StatusCompleted, stateFiles{"a": {"000001.sst": "link:" + id1, "000002.sst": "t2", "MANIFEST": "m2"}})
		if len(rep.Verdicts) == 0 {
			t.Fatal("GC did not run between the record and the pointers: the test proves nothing")
		}
		mustNotDelete(t, rep, append(referencedBy(t, bs, id2), recordKey(id2)), "the checkpoint the pointers now name holds")
		if !dry {
			restoreElsewhere(t, bs, id2)
		}
	})
}

// A restore that pinned a checkpoint after GC listed the pins, and read
// its record before GC deleted it, had its files deleted under it (by the
// writer's own GC too).
func TestGCBesideARestoreThatPinsAfterTheListingKeepsItsFiles(t *testing.T) {
	for _, run := range []string{"dry run", "real run", "writer's run"} {
		t.Run(run, func(t *testing.T) {
			bs := newStepStore(newMem())
			w := newWriter(t, bs, Options{Keep: 1})
			want := compactingHistory(t, w, 4)
			id1 := checkpoint.NewID(1)
			files := referencedBy(t, bs, id1)
			// The restore starts once GC has listed the pins: it pins 1,
			// reads its record, and waits on a file until GC is done.
			readRecord, gcDone, restored := make(chan struct{}), make(chan struct{}), make(chan error, 1)
			gate := &gateStore{Blobstore: bs, key: files[0], reached: readRecord, wait: gcDone}
			reader := New(gate, t.TempDir(), Options{})
			bs.onList[dirPins] = func() {
				go func() { restored <- reader.Restore(t.Context(), id1) }()
				<-readRecord
			}
			var rep GCReport
			switch run {
			case "writer's run":
				var err error
				if rep, err = w.GC(t.Context(), GCOptions{Now: time.Now().Add(2 * time.Hour)}); err != nil {
					t.Fatal(err)
				}
			default:
				rep = gcBeside(t, bs, 1, run == "dry run")
			}
			close(gcDone)
			if err := <-restored; err != nil {
				t.Fatalf("the restore that began during GC: %v", err)
			}
			if got := readTree(t, reader.StateDir(id1)); len(got) != len(want[id1]) {
				t.Errorf("restored %v, want %v", got, want[id1])
			}
			if run != "dry run" {
				mustNotDelete(t, rep, files, "the restore in progress reads")
				if rep.FilesKept == "" {
					t.Errorf("the report does not say why files were kept: %+v", rep)
				}
			}
		})
	}
}

// gateStore stops the first Get of key: it closes reached and waits for
// wait to be closed.
type gateStore struct {
	blobstore.Blobstore
	key     string
	once    sync.Once
	reached chan struct{}
	wait    chan struct{}
}

func (g *gateStore) Unwrap() blobstore.Blobstore { return g.Blobstore }

func (g *gateStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if key == g.key {
		g.once.Do(func() { close(g.reached); <-g.wait })
	}
	return g.Blobstore.Get(ctx, key)
}

func (g *gateStore) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if key == g.key {
		g.once.Do(func() { close(g.reached); <-g.wait })
	}
	return g.Blobstore.GetRange(ctx, key, off, n)
}

// A new writer that takes over after a crash reuses the id of the dead
// writer's record that no pointer names, replacing that record; GC had
// read the old one and deleted the new one under the pointer about to
// name it. The record is deleted only if unchanged since it was read: the
// rewrite lands after GC read the records, or between GC's last Stat and
// its delete (closed only by the store's If-Match, ConditionalDeleter).
func TestGCBesideAWriterKeepsARecordRewrittenAfterItWasRead(t *testing.T) {
	for _, when := range []string{"after the listing", "after the last Stat"} {
		t.Run(when, func(t *testing.T) {
			bs := newStepStore(newMem())
			dead := newWriter(t, bs, Options{Keep: 5})
			id1, id2 := checkpoint.NewID(1), checkpoint.NewID(2)
			saveState(t, dead, id1, checkpoint.StatusCompleted, stateFiles{"a": {"000001.sst": "t1", "MANIFEST": "m1"}})
			// A writer wrote 2's record and crashed before the pointers.
			spy := newBlobSpy(bs)
			crashing := New(spy, t.TempDir(), Options{Keep: 5})
			if _, err := crashing.Acquire(t.Context()); err != nil {
				t.Fatal(err)
			}
			spy.failIf = func(_, key string) bool { return key == keyLatest }
			d := record(id2, checkpoint.StatusCompleted)
			d.StateDirs = writeState(t, crashing, id2, stateFiles{"a": {"000002.sst": "dead", "MANIFEST": "md"}})
			if err := crashing.Save(t.Context(), d); err == nil {
				t.Fatal("the crashing Save did not fail")
			}
			// The next writer takes over and saves 2 again during GC.
			next := newWriter(t, bs, Options{Keep: 5})
			saved := false
			save := func() {
				saveState(t, next, id2, checkpoint.StatusCompleted, stateFiles{"a": {"000002.sst": "alive", "MANIFEST": "m2"}})
				saved = true
			}
			view := &statHook{Blobstore: bs}
			if when == "after the listing" {
				bs.onList[dirShared] = save
			} else {
				view.key, view.after = recordKey(id2), save
			}
			rep, err := New(view, "", Options{Keep: 1}).GC(t.Context(), GCOptions{Now: time.Now().Add(2 * time.Hour)})
			if err != nil {
				t.Fatal(err)
			}
			if !saved {
				t.Fatal("the writer did not save during GC: the test proves nothing")
			}
			if got := restoreElsewhere(t, bs, id2); got["a/000002.sst"] != "alive" {
				t.Fatalf("restored %v after GC (report %+v)", got, rep)
			}
			if l, err := New(bs, "", Options{}).LoadLatestCompleted(t.Context()); err != nil || idOf(l) != id2 {
				t.Fatalf("latest completed %s, %v", idOf(l), err)
			}
		})
	}
}

// statHook runs after once, right after the first Stat of key returns.
type statHook struct {
	blobstore.Blobstore
	key   string
	after func()
}

func (h *statHook) Unwrap() blobstore.Blobstore { return h.Blobstore }

func (h *statHook) Stat(ctx context.Context, key string) (blobstore.ObjectInfo, error) {
	info, err := h.Blobstore.Stat(ctx, key)
	if key == h.key && h.after != nil {
		f := h.after
		h.after = nil
		f()
	}
	return info, err
}

// An operator's GC (no Acquire) deletes what retention says, and the
// writer is not fenced: _writer and the pointers are untouched, and it
// saves and collects on.
func TestGCWithoutTheWriterRoleDeletesAndDoesNotFence(t *testing.T) {
	bs := newMem()
	w := newWriter(t, bs, Options{Keep: 1})
	compactingHistory(t, w, 5)
	before := map[string]string{}
	for _, k := range []string{keyWriter, keyLatest, keyLatestCompleted, keyMark} {
		info, err := bs.Stat(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		before[k] = info.ETag
	}
	rep := gcBeside(t, bs, 1, false)
	if rep.Objects == 0 || !slices.Equal(rep.Retained, []string{checkpoint.NewID(5)}) {
		t.Fatalf("GC without the writer role: %+v", rep)
	}
	if !slices.Equal(recordIDs(t, bs), []string{checkpoint.NewID(5)}) {
		t.Fatalf("records left: %v", recordIDs(t, bs))
	}
	for k, etag := range before {
		if info, err := bs.Stat(ctx, k); err != nil || info.ETag != etag {
			t.Errorf("GC without the writer role rewrote %s (%v)", k, err)
		}
	}
	saveState(t, w, checkpoint.NewID(6), checkpoint.StatusCompleted, stateFiles{"w0": {"000006.sst": "t6", "MANIFEST": "m6"}})
	if _, err := w.GC(ctx, GCOptions{}); err != nil {
		t.Fatalf("the writer's own GC after an operator's: %v", err)
	}
	restoreElsewhere(t, bs, checkpoint.NewID(6))
}

// GC plans only over keys of the layout: a user's look-alike files next to
// a job's data in a marked store are left alone, however old.
func TestGCLeavesLookAlikeKeysAlone(t *testing.T) {
	bs := newMem()
	w := newWriter(t, bs, Options{Keep: 1})
	compactingHistory(t, w, 3)
	// Checkpoint 1, which retention drops: its look-alikes stay.
	lookAlikes := lookAlikes(checkpoint.NewID(1))
	for _, k := range lookAlikes {
		if err := bs.Put(ctx, k, strings.NewReader("user data")); err != nil {
			t.Fatal(err)
		}
	}
	for _, dry := range []bool{true, false} {
		rep := gcBeside(t, bs, 1, dry)
		if rep.Objects == 0 {
			t.Fatalf("GC found nothing to delete: the test proves nothing")
		}
		mustNotDelete(t, rep, lookAlikes, "is not a key of the layout")
		for _, v := range rep.Verdicts {
			if v.ID == "old" {
				t.Errorf("GC decided on checkpoint %q: %+v", v.ID, v)
			}
		}
	}
	for _, k := range lookAlikes {
		if ok, err := bs.Exists(ctx, k); err != nil || !ok {
			t.Errorf("%s is gone (%v)", k, err)
		}
	}
}

// The writer's file cache remembers only what its last record references:
// a table that left the state and came back (the same file, hard-linked
// from an older local checkpoint) after an operator's GC deleted it is
// uploaded again, not referenced where it no longer is.
func TestAWriterNeverReusesATableAnOperatorsGCDeleted(t *testing.T) {
	bs := newMem()
	w := newWriter(t, bs, Options{Keep: 5})
	id1, id2, id3 := checkpoint.NewID(1), checkpoint.NewID(2), checkpoint.NewID(3)
	saveState(t, w, id1, checkpoint.StatusCompleted, stateFiles{"a": {"000001.sst": "t1", "MANIFEST": "m1"}})
	saveState(t, w, id2, checkpoint.StatusCompleted, stateFiles{"a": {"000002.sst": "t2", "MANIFEST": "m2"}})
	rep := gcBeside(t, bs, 1, false)
	if !slices.Contains(rep.Dropped, id1) {
		t.Fatalf("the operator's GC kept %s: the test proves nothing (%+v)", id1, rep)
	}
	saveState(t, w, id3, checkpoint.StatusCompleted, stateFiles{"a": {"000001.sst": "link:" + id1, "MANIFEST": "m3"}})
	if got := restoreElsewhere(t, bs, id3); got["a/000001.sst"] != "t1" {
		t.Fatalf("restored %v", got)
	}
}

// The writer's own GC reads the fence after its last other request for a
// record (the Stat of its ETag) and right before the delete: a writer
// that takes over while that Stat is in flight fences the delete. With
// the check before the Stat, the simulation's fenced writers deleted
// records (integration/dst seeds 10, 32, 143).
func TestWritersGCFencedDuringTheStatOfARecordDeletesNothing(t *testing.T) {
	bs := newMem()
	view := &statHook{Blobstore: bs}
	w := newWriter(t, view, Options{Keep: 1})
	compactingHistory(t, w, 3)
	id1 := checkpoint.NewID(1)
	took := false
	view.key, view.after = recordKey(id1), func() {
		newWriter(t, bs, Options{Keep: 1})
		took = true
	}
	_, err := w.GC(t.Context(), GCOptions{Now: time.Now().Add(time.Hour)})
	if !took {
		t.Fatal("no writer took over during GC's Stat of the record: the test proves nothing")
	}
	if !errors.Is(err, checkpoint.ErrFenced) {
		t.Fatalf("GC of a writer fenced during its run: %v, want ErrFenced", err)
	}
	if ok, err := bs.Exists(t.Context(), recordKey(id1)); err != nil || !ok {
		t.Fatalf("the fenced writer deleted %s (exists %v, %v)", recordKey(id1), ok, err)
	}
}

// tornReads fails the first n Gets of key with blobstore.ErrChecksum, as
// versitygw does for a GET racing a PUT of the key.
type tornReads struct {
	blobstore.Blobstore
	key string
	n   int
}

func (r *tornReads) Unwrap() blobstore.Blobstore { return r.Blobstore }

func (r *tornReads) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if key == r.key && r.n != 0 {
		r.n--
		return nil, fmt.Errorf("get %q: %w", key, blobstore.ErrChecksum)
	}
	return r.Blobstore.Get(ctx, key)
}

// An operator's GC reads pointers the writer is replacing: a read that
// fails its checksum is read again, and only a lasting mismatch fails.
func TestGCReadsAPointerAgainWhenItFailsItsChecksum(t *testing.T) {
	mem := newMem()
	compactingHistory(t, newWriter(t, mem, Options{Keep: 1}), 3)
	for _, tc := range []struct {
		torn int
		ok   bool
	}{{2, true}, {-1, false}} {
		bs := &tornReads{Blobstore: mem, key: keyLatestCompleted, n: tc.torn}
		_, err := New(bs, "", Options{Keep: 1}).GC(t.Context(), GCOptions{DryRun: true})
		if tc.ok && err != nil {
			t.Errorf("two torn reads of %s: %v, want the third to do", keyLatestCompleted, err)
		}
		if !tc.ok && !errors.Is(err, blobstore.ErrChecksum) {
			t.Errorf("every read of %s torn: %v, want ErrChecksum", keyLatestCompleted, err)
		}
	}
}
