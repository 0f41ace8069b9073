package blobstorage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
	"github.com/tidemark-io/tidemark/checkpoint"
)

// compactingHistory saves n completed checkpoints the way Pebble would:
// each adds a table, hard-links the previous ones, and every third one
// compacts the older tables away. It returns what each checkpoint holds.
func compactingHistory(t *testing.T, s *Storage, n int) map[string]map[string]string {
	t.Helper()
	want := map[string]map[string]string{}
	live := map[string]string{} // table → id that wrote it
	content := map[string]string{}
	for i := 1; i <= n; i++ {
		id := checkpoint.NewID(uint64(i))
		if i%3 == 0 {
			clear(live)
		}
		table := fmt.Sprintf("%06d.sst", i)
		content[table] = strings.Repeat(table, 100)
		files := stateFiles{"w0": {
			table:      content[table],
			"MANIFEST": fmt.Sprintf("manifest %d", i),
		}}
		for tb, from := range live {
			files["w0"][tb] = "link:" + from
		}
		live[table] = id
		saveState(t, s, id, checkpoint.StatusCompleted, files)
		want[id] = flatten(files, func(_, p, c string) string {
			if strings.HasPrefix(c, "link:") {
				return content[p]
			}
			return c
		})
	}
	return want
}

func recordIDs(t *testing.T, bs blobstore.Blobstore) []string {
	t.Helper()
	var ids []string
	for _, k := range blobstoretest.ListKeys(t, bs, "checkpoints/") {
		if id, ok := strings.CutSuffix(strings.TrimPrefix(k, "checkpoints/"), "/checkpoint.json"); ok {
			ids = append(ids, id)
		}
	}
	return ids
}

func TestGCKeepsNewestCompletedAndEverythingTheyNeed(t *testing.T) {
	bs := newMem()
	s := newWriter(t, bs, Options{Keep: 2})
	want := compactingHistory(t, s, 7)
	if err := bs.Put(ctx, checkpoint.SavepointKey("keep-me"), strings.NewReader("archive")); err != nil {
		t.Fatal(err)
	}

	rep, err := s.GC(ctx, GCOptions{Now: time.Now().Add(2 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	retained := []string{checkpoint.NewID(6), checkpoint.NewID(7)}
	if !slices.Equal(rep.Retained, retained) || !slices.Equal(recordIDs(t, bs), retained) {
		t.Fatalf("retained %v, records %v; want %v", rep.Retained, recordIDs(t, bs), retained)
	}
	if len(rep.Dropped) != 5 || rep.SharedObjects == 0 || rep.Bytes == 0 {
		t.Errorf("report = %+v", rep)
	}
	for _, k := range blobstoretest.ListKeys(t, bs, "checkpoints/") {
		if !strings.HasPrefix(k, "checkpoints/"+checkpoint.NewID(6)) && !strings.HasPrefix(k, "checkpoints/"+checkpoint.NewID(7)) {
			t.Errorf("object of a dropped checkpoint left: %s", k)
		}
	}
	// Only the tables of 6 and 7 remain: 000006.sst and 000007.sst (the
	// compaction at 6 dropped the older ones).
	if shared := blobstoretest.ListKeys(t, bs, "shared/"); len(shared) != 2 {
		t.Errorf("shared = %v, want the two tables 6 and 7 use", shared)
	}
	for _, id := range retained {
		if got := restoreElsewhere(t, bs, id); !reflect.DeepEqual(got, want[id]) {
			t.Errorf("%s restores as %v, want %v", id, got, want[id])
		}
	}
	if ok, _ := bs.Exists(ctx, checkpoint.SavepointKey("keep-me")); !ok {
		t.Error("GC deleted a savepoint")
	}
	// The writer goes on: tables GC deleted are uploaded again if needed.
	saveState(t, s, checkpoint.NewID(8), checkpoint.StatusCompleted, stateFiles{"w0": {"000007.sst": "link:" + checkpoint.NewID(7)}})
	if err := s.Verify(ctx, checkpoint.NewID(8)); err != nil {
		t.Errorf("Verify after GC: %v", err)
	}
}

func TestGCKeepsUnreferencedSharedFilesWithinGrace(t *testing.T) {
	bs := newMem()
	s := newWriter(t, bs, Options{Keep: 1, Grace: time.Hour})
	compactingHistory(t, s, 4)
	before := blobstoretest.ListKeys(t, bs, "shared/")
	rep, err := s.GC(ctx, GCOptions{Now: time.Now().Add(30 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Retained, []string{checkpoint.NewID(4)}) {
		t.Errorf("retained %v", rep.Retained)
	}
	if after := blobstoretest.ListKeys(t, bs, "shared/"); !slices.Equal(after, before) || rep.SharedObjects != 0 {
		t.Errorf("shared files deleted within grace: before %v after %v", before, after)
	}
	if _, err := s.GC(ctx, GCOptions{Now: time.Now().Add(2 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if after := blobstoretest.ListKeys(t, bs, "shared/"); len(after) >= len(before) {
		t.Errorf("shared files not deleted after grace: %v", after)
	}
}

func TestGCDryRunDeletesNothingAndReportsTheSame(t *testing.T) {
	bs := newMem()
	s := newWriter(t, bs, Options{Keep: 1})
	compactingHistory(t, s, 5)
	now := time.Now().Add(2 * time.Hour)
	before := blobstoretest.ListKeys(t, bs, "")
	dry, err := s.GC(ctx, GCOptions{DryRun: true, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if after := blobstoretest.ListKeys(t, bs, ""); !slices.Equal(after, before) {
		t.Fatalf("dry run deleted %d objects", len(before)-len(after))
	}
	real, err := s.GC(ctx, GCOptions{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(dry, real) || real.Objects == 0 {
		t.Errorf("dry run reported %+v, the real run %+v", dry, real)
	}
	if got := len(blobstoretest.ListKeys(t, bs, "")); got != len(before)-real.Objects {
		t.Errorf("%d objects left, want %d", got, len(before)-real.Objects)
	}
}

func TestGCKeepsPinnedCheckpointUntilPinExpires(t *testing.T) {
	bs := newMem()
	s := newWriter(t, bs, Options{Keep: 1, Grace: time.Minute, PinTTL: time.Hour})
	want := compactingHistory(t, s, 4)
	// A restore of checkpoint 1 is in progress elsewhere.
	if err := bs.Put(ctx, "pins/"+checkpoint.NewID(1)+"/node-b", strings.NewReader("")); err != nil {
		t.Fatal(err)
	}
	rep, err := s.GC(ctx, GCOptions{Now: time.Now().Add(10 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Retained, []string{checkpoint.NewID(1), checkpoint.NewID(4)}) {
		t.Fatalf("retained %v, want the pinned one and the latest", rep.Retained)
	}
	if got := restoreElsewhere(t, bs, checkpoint.NewID(1)); !reflect.DeepEqual(got, want[checkpoint.NewID(1)]) {
		t.Errorf("pinned checkpoint restores as %v", got)
	}
	rep, err = s.GC(ctx, GCOptions{Now: time.Now().Add(2 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Retained, []string{checkpoint.NewID(4)}) || rep.Pins != 1 {
		t.Errorf("after the pin expired: %+v", rep)
	}
	if pins := blobstoretest.ListKeys(t, bs, "pins/"); len(pins) != 0 {
		t.Errorf("expired pins left: %v", pins)
	}
}

func TestGCRemovesLeftoversOfCrashedSavesAfterGrace(t *testing.T) {
	spy := newBlobSpy(newMem())
	s := newWriter(t, spy, Options{Keep: 1})
	saveState(t, s, checkpoint.NewID(1), checkpoint.StatusCompleted, c1Files)
	// Save of 2 crashes just before its record: files, no record.
	d := record(checkpoint.NewID(2), checkpoint.StatusCompleted)
	d.StateDirs = writeState(t, s, d.ID, stateFiles{"w0": {"new.sst": "n", "MANIFEST": "m"}})
	spy.failIf = func(_, key string) bool { return key == recordKey(checkpoint.NewID(2)) }
	if err := s.Save(ctx, d); err == nil {
		t.Fatal("Save did not fail")
	}
	spy.failIf = nil
	orphans := blobstoretest.ListKeys(t, spy, "checkpoints/"+checkpoint.NewID(2)+"/")
	if len(orphans) == 0 {
		t.Fatal("the crashed save left nothing: the test proves nothing")
	}
	rep, err := s.GC(ctx, GCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Retained, []string{checkpoint.NewID(1), checkpoint.NewID(2)}) {
		t.Errorf("within grace: retained %v, want the save that may be in progress too", rep.Retained)
	}
	rep, err = s.GC(ctx, GCOptions{Now: time.Now().Add(2 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Dropped, []string{checkpoint.NewID(2)}) || len(blobstoretest.ListKeys(t, spy, "checkpoints/"+checkpoint.NewID(2)+"/")) != 0 {
		t.Errorf("after grace: dropped %v, left %v", rep.Dropped, blobstoretest.ListKeys(t, spy, "checkpoints/"+checkpoint.NewID(2)+"/"))
	}
	if shared := blobstoretest.ListKeys(t, spy, "shared/"); len(shared) != 2 {
		t.Errorf("shared = %v, want only checkpoint 1's two tables", shared)
	}
}

func TestGCRetainsLatestPreparedAndDropsAbandonedOnes(t *testing.T) {
	bs := newMem()
	s := newWriter(t, bs, Options{Keep: 1})
	saveState(t, s, checkpoint.NewID(1), checkpoint.StatusCompleted, c1Files)
	saveState(t, s, checkpoint.NewID(2), checkpoint.StatusPrepared, c1Files)
	later := GCOptions{Now: time.Now().Add(2 * time.Hour)}
	rep, err := s.GC(ctx, later)
	if err != nil {
		t.Fatal(err)
	}
	// checkpoint.Recover reads the prepared latest checkpoint: it must survive.
	if !slices.Equal(rep.Retained, []string{checkpoint.NewID(1), checkpoint.NewID(2)}) {
		t.Fatalf("retained %v", rep.Retained)
	}
	if d, err := s.Load(ctx); err != nil || idOf(d) != checkpoint.NewID(2) {
		t.Fatalf("Load after GC = %s, %v", idOf(d), err)
	}
	// Recovery abandoned 2 (its sink transaction never committed) and
	// checkpoint 3 completed: 2 is garbage now.
	saveState(t, s, checkpoint.NewID(3), checkpoint.StatusCompleted, c1Files)
	rep, err = s.GC(ctx, later)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Retained, []string{checkpoint.NewID(3)}) || !slices.Equal(rep.Dropped, []string{checkpoint.NewID(1), checkpoint.NewID(2)}) {
		t.Errorf("report %+v", rep)
	}
}

// storeETags returns every key of bs with its ETag: two equal snapshots
// mean nothing was written or deleted in between.
func storeETags(t *testing.T, bs blobstore.Blobstore) map[string]string {
	t.Helper()
	out := map[string]string{}
	for o, err := range bs.List(ctx, "") {
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		out[o.Key] = o.ETag
	}
	return out
}

func TestGCDryRunNeedsNoWriterRoleAndLeavesTheLiveWriterAlone(t *testing.T) {
	bs := newMem()
	live := newWriter(t, bs, Options{Keep: 1})
	compactingHistory(t, live, 5)
	// An expired restore pin: a real run deletes it, a dry run must not.
	if err := bs.Put(ctx, "pins/"+checkpoint.NewID(1)+"/node-b", strings.NewReader("")); err != nil {
		t.Fatal(err)
	}
	epoch := live.Epoch()
	writer, err := bs.Stat(ctx, keyWriter)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Add(2 * time.Hour)
	before := storeETags(t, bs)

	// An operator's dry run from another process: no Acquire.
	operator := New(bs, "", Options{Keep: 1})
	dry, err := operator.GC(ctx, GCOptions{DryRun: true, Now: now})
	if err != nil {
		t.Fatalf("dry run without Acquire: %v", err)
	}
	if after := storeETags(t, bs); !reflect.DeepEqual(after, before) {
		t.Fatalf("dry run changed the store:\nbefore %v\nafter  %v", before, after)
	}
	if operator.Epoch() != 0 {
		t.Errorf("dry run took epoch %d", operator.Epoch())
	}
	if info, err := bs.Stat(ctx, keyWriter); err != nil || info.ETag != writer.ETag || live.Epoch() != epoch {
		t.Fatalf("_writer %+v, %v (was ETag %q); live epoch %d (was %d)", info, err, writer.ETag, live.Epoch(), epoch)
	}
	if dry.Objects == 0 || dry.SharedObjects == 0 || dry.Pins != 1 {
		t.Fatalf("dry run found nothing to delete: %+v (the test proves nothing)", dry)
	}

	// The live writer is not fenced: it still garbage-collects, and
	// deletes exactly what the dry run reported.
	real, err := live.GC(ctx, GCOptions{Now: now})
	if err != nil {
		t.Fatalf("real GC by the live writer after the dry run: %v", err)
	}
	if !reflect.DeepEqual(dry, real) {
		t.Errorf("dry run reported %+v, the real run %+v", dry, real)
	}
	after := storeETags(t, bs)
	if deleted := len(before) - len(after); deleted != real.Objects+real.Pins {
		t.Errorf("real run deleted %d objects, reported %d objects and %d pins", deleted, real.Objects, real.Pins)
	}
	if !slices.Equal(recordIDs(t, bs), dry.Retained) {
		t.Errorf("records left %v, dry run said %v would be kept", recordIDs(t, bs), dry.Retained)
	}
}

func TestGCDryRunOfAFencedWriterStillReports(t *testing.T) {
	bs := newMem()
	old := newWriter(t, bs, Options{Keep: 1})
	compactingHistory(t, old, 4)
	newer := newWriter(t, bs, Options{Keep: 1})
	now := time.Now().Add(2 * time.Hour)
	if _, err := old.GC(ctx, GCOptions{Now: now}); !errors.Is(err, checkpoint.ErrFenced) {
		t.Fatalf("real GC of a fenced writer = %v, want checkpoint.ErrFenced", err)
	}
	dry, err := old.GC(ctx, GCOptions{DryRun: true, Now: now})
	if err != nil {
		t.Fatalf("dry run of a fenced writer: %v", err)
	}
	real, err := newer.GC(ctx, GCOptions{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(dry, real) || real.Objects == 0 {
		t.Errorf("dry run reported %+v, the real run %+v", dry, real)
	}
}

// A retained record that cannot be read (a transient error) hides which
// shared files it uses: GC must then delete no shared file at all, or it
// would delete the tables only that checkpoint has.
func TestGCDeletesNoSharedFileWhileARetainedRecordIsUnreadable(t *testing.T) {
	mem := newMem()
	spy := newReadSpy(mem)
	s := newWriter(t, spy, Options{Keep: 3})
	want := compactingHistory(t, s, 6) // 000006.sst is used by 6 alone
	latest := checkpoint.NewID(6)
	spy.failGet = func(key string) bool { return key == recordKey(latest) }

	rep, err := s.GC(ctx, GCOptions{Now: time.Now().Add(2 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	spy.failGet = nil
	if rep.SharedObjects != 0 {
		t.Errorf("GC deleted %d shared files while the record of %s was unreadable", rep.SharedObjects, latest)
	}
	if got := restoreElsewhere(t, mem, latest); !reflect.DeepEqual(got, want[latest]) {
		t.Errorf("%s restores as %v, want %v", latest, got, want[latest])
	}
	// Once the record reads again, the next run collects what is unused.
	if rep, err := s.GC(ctx, GCOptions{Now: time.Now().Add(2 * time.Hour)}); err != nil || rep.SharedObjects == 0 {
		t.Errorf("GC after the record reads again = %+v, %v; want shared files deleted", rep, err)
	}
}

// GC aborts incomplete uploads under the whole job prefix — a savepoint
// create or the job's sink can leave one too, not only a save (finding
// 11) — through any decorator.
func TestGCAbortsIncompleteUploadsUnderTheWholeJobPrefix(t *testing.T) {
	base := blobstoretest.NewCapable()
	job, err := blobstore.WithPrefix(base, "jobs/a")
	if err != nil {
		t.Fatal(err)
	}
	s := newWriter(t, job, Options{})
	rep, err := s.GC(t.Context(), GCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := base.Aborted(); !slices.Equal(got, []string{"jobs/a/"}) || rep.AbortedUploads != 1 {
		t.Fatalf("GC aborted uploads under %q (reported %d), want the job's whole prefix [jobs/a/]", got, rep.AbortedUploads)
	}
}

// A pointer that names a checkpoint without a record is damage: GC (dry
// run or not) refuses with ErrCorrupt and deletes nothing, as
// ls, show and verify report it (it used to plan by the dangling id and
// delete).
func TestGCDeletesNothingWhileAPointerDangles(t *testing.T) {
	mem := newMem()
	s := newWriter(t, mem, Options{Keep: 1})
	compactingHistory(t, s, 4)
	for _, key := range []string{keyLatestCompleted, keyLatest} {
		before := blobstoretest.ListKeys(t, mem, "")
		ptr, err := mem.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		orig, err := io.ReadAll(ptr)
		ptr.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := mem.Put(ctx, key, strings.NewReader(`{"id":"`+checkpoint.NewID(99)+`","epoch":1}`)); err != nil {
			t.Fatal(err)
		}
		for _, dry := range []bool{true, false} {
			_, err := s.GC(ctx, GCOptions{DryRun: dry, Now: time.Now().Add(2 * time.Hour)})
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), checkpoint.NewID(99)) {
				t.Errorf("GC (dry run %v) with %s dangling: %v, want ErrCorrupt naming the id", dry, key, err)
			}
		}
		if after := blobstoretest.ListKeys(t, mem, ""); !slices.Equal(before, after) {
			t.Errorf("GC with %s dangling changed the store:\nbefore %v\nafter  %v", key, before, after)
		}
		if err := mem.Put(ctx, key, bytes.NewReader(orig)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.GC(ctx, GCOptions{Now: time.Now().Add(2 * time.Hour)}); err != nil {
		t.Errorf("GC with the pointers repaired: %v", err)
	}
}

// pinOnDelete is a store where a restore pins checkpoint id and reads its
// record just before GC's delete of that record applies (the delete was
// in flight): the simulation found this (integration/sim, seed 29).
type pinOnDelete struct {
	blobstore.Blobstore
	id     string
	record []byte
}

func (p *pinOnDelete) Delete(ctx context.Context, key string) error {
	if key == recordKey(p.id) && p.record == nil {
		if err := p.Blobstore.Put(ctx, pinKey(p.id, "late"), strings.NewReader("")); err != nil {
			return err
		}
		rc, err := p.Blobstore.Get(ctx, key)
		if err != nil {
			return err
		}
		defer rc.Close()
		if p.record, err = io.ReadAll(rc); err != nil {
			return err
		}
	}
	return p.Blobstore.Delete(ctx, key)
}

// A restore that pinned a checkpoint after GC listed the pins, and read
// its record before GC deleted it, keeps the files it is downloading.
func TestGCKeepsTheFilesOfADroppedCheckpointPinnedAfterTheListing(t *testing.T) {
	mem := newMem()
	bs := &pinOnDelete{Blobstore: mem, id: checkpoint.NewID(1)}
	s := newWriter(t, bs, Options{Keep: 1, Grace: time.Minute, PinTTL: time.Hour})
	compactingHistory(t, s, 4)
	files, err := s.Files(ctx, checkpoint.NewID(1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.GC(ctx, GCOptions{Now: time.Now().Add(10 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if bs.record == nil {
		t.Fatal("GC did not delete the record of checkpoint 1")
	}
	for _, refs := range files {
		for _, f := range refs {
			if ok, err := mem.Exists(ctx, f.Key); err != nil || !ok {
				t.Errorf("%s, which the pinned restore reads, was deleted (%v)", f.Key, err)
			}
		}
	}
}

// lagging hides key from the first n listings of the store, as a listing
// that lags a fresh write does (some S3-compatible servers, a cache).
type lagging struct {
	blobstore.Blobstore
	key string
	n   int
}

func (l *lagging) Unwrap() blobstore.Blobstore { return l.Blobstore }

func (l *lagging) List(ctx context.Context, prefix string) iter.Seq2[blobstore.ObjectInfo, error] {
	hide := strings.HasPrefix(l.key, prefix) && l.n > 0
	if hide {
		l.n--
	}
	return func(yield func(blobstore.ObjectInfo, error) bool) {
		for o, err := range l.Blobstore.List(ctx, prefix) {
			if err == nil && hide && o.Key == l.key {
				continue
			}
			if !yield(o, err) {
				return
			}
		}
	}
}

// A listing that lags the pointer by a fresh record is not damage: GC
// lists again (it said "corrupt" and stopped; the simulation's stale
// listings showed it). A listing that keeps lagging stops the run, and
// is not called corrupt.
func TestGCListsAgainWhenTheListingLagsAPointer(t *testing.T) {
	mem := newMem()
	compactingHistory(t, newWriter(t, mem, Options{Keep: 1}), 4)
	key := recordKey(checkpoint.NewID(4))
	rep, err := New(&lagging{Blobstore: mem, key: key, n: 1}, "", Options{Keep: 1}).GC(ctx, GCOptions{Now: time.Now().Add(2 * time.Hour)})
	if err != nil || rep.Objects == 0 {
		t.Fatalf("GC once the listing caught up: %+v, %v", rep, err)
	}
	_, err = New(&lagging{Blobstore: mem, key: key, n: 10}, "", Options{Keep: 1}).GC(ctx, GCOptions{Now: time.Now().Add(2 * time.Hour)})
	if !errors.Is(err, ErrListingUnsettled) || errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "lags") {
		t.Fatalf("GC on a listing that keeps lagging: %v, want an error saying so, not ErrCorrupt", err)
	}
}
