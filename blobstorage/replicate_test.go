package blobstorage

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/archive"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
	"github.com/tidemark-io/tidemark/blobstore/encrypted"
	"github.com/tidemark-io/tidemark/checkpoint"
)

// linkStore is the replica as a replicator sees it over a network: every
// call can be refused (the link is cut), the context of the n-th call
// cancelled (the replicator killed there), and the order of successful
// writes is recorded.
type linkStore struct {
	blobstore.Blobstore
	mu      sync.Mutex
	cut     bool
	calls   int
	cancel  func()
	at      int      // cancel before call number at (0: never)
	written []string // keys successfully written, in order
	puts    map[string]int
}

func newLinkStore(bs blobstore.Blobstore) *linkStore {
	return &linkStore{Blobstore: bs, puts: map[string]int{}}
}

var errLinkCut = errors.New("test: the link to the replica is cut")

func (l *linkStore) enter(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cut {
		return errLinkCut
	}
	l.calls++
	if l.at > 0 && l.calls >= l.at && l.cancel != nil {
		l.cancel()
	}
	return ctx.Err()
}

// wrote records a successful write of key; a pointer is recorded as
// "<key>=<id it names>".
func (l *linkStore) wrote(key string, body []byte, err error) {
	if err != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.puts[key]++
	if key == keyLatest || key == keyLatestCompleted {
		var p pointer
		_ = json.Unmarshal(body, &p)
		key += "=" + p.ID
	}
	l.written = append(l.written, key)
}

// body reads a pointer's body so that wrote can record it; other bodies
// stream through.
func body(key string, r io.Reader) (io.Reader, []byte) {
	if key != keyLatest && key != keyLatestCompleted {
		return r, nil
	}
	b, _ := io.ReadAll(r)
	return bytes.NewReader(b), b
}

func (l *linkStore) Put(ctx context.Context, key string, r io.Reader) error {
	if err := l.enter(ctx); err != nil {
		return err
	}
	r, b := body(key, r)
	err := l.Blobstore.Put(ctx, key, r)
	l.wrote(key, b, err)
	return err
}

func (l *linkStore) PutIfAbsent(ctx context.Context, key string, r io.Reader) (string, error) {
	if err := l.enter(ctx); err != nil {
		return "", err
	}
	r, b := body(key, r)
	etag, err := l.Blobstore.PutIfAbsent(ctx, key, r)
	l.wrote(key, b, err)
	return etag, err
}

func (l *linkStore) PutIfMatch(ctx context.Context, key, match string, r io.Reader) (string, error) {
	if err := l.enter(ctx); err != nil {
		return "", err
	}
	r, b := body(key, r)
	etag, err := l.Blobstore.PutIfMatch(ctx, key, match, r)
	l.wrote(key, b, err)
	return etag, err
}

func (l *linkStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := l.enter(ctx); err != nil {
		return nil, err
	}
	return l.Blobstore.Get(ctx, key)
}

func (l *linkStore) Stat(ctx context.Context, key string) (blobstore.ObjectInfo, error) {
	if err := l.enter(ctx); err != nil {
		return blobstore.ObjectInfo{}, err
	}
	return l.Blobstore.Stat(ctx, key)
}

func (l *linkStore) Delete(ctx context.Context, key string) error {
	if err := l.enter(ctx); err != nil {
		return err
	}
	return l.Blobstore.Delete(ctx, key)
}

func (l *linkStore) setCut(cut bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cut = cut
}

func (l *linkStore) Unwrap() blobstore.Blobstore { return l.Blobstore }

// job saves checkpoints into a source store the way a job does: each
// checkpoint keeps the tables of the one before (hard links) and adds
// one, with a MANIFEST of its own.
type job struct {
	t   *testing.T
	s   *Storage
	seq uint64
}

func newJob(t *testing.T, bs blobstore.Blobstore) *job {
	return &job{t: t, s: newWriter(t, bs, Options{})}
}

func (j *job) checkpoint() string {
	j.t.Helper()
	j.seq++
	id := checkpoint.NewID(j.seq)
	files := stateFiles{"w0": {"MANIFEST": "manifest of " + id, fmt.Sprintf("%06d.sst", j.seq): strings.Repeat("t", 1000+int(j.seq))}}
	for old := uint64(1); old < j.seq; old++ {
		files["w0"][fmt.Sprintf("%06d.sst", old)] = "link:" + checkpoint.NewID(j.seq-1)
	}
	d := record(id, checkpoint.StatusCompleted)
	d.JobID = ""
	d.StateDirs = writeState(j.t, j.s, id, files)
	if err := j.s.Save(j.t.Context(), d); err != nil {
		j.t.Fatalf("Save(%s): %v", id, err)
	}
	return id
}

// replicaHolds checks that the replica's latest completed checkpoint is
// want, that it verifies and restores as the source's does, and that its
// record is the source's byte for byte.
func replicaHolds(t *testing.T, src, dst blobstore.Blobstore, want string) {
	t.Helper()
	got, err := New(dst, "", Options{}).PointerID(t.Context(), PointerLatestCompleted)
	if err != nil || got != want {
		t.Fatalf("the replica's latest completed = %q, %v; want %s", got, err, want)
	}
	if err := New(dst, "", Options{}).Verify(t.Context(), want); err != nil {
		t.Fatalf("the replica's %s does not verify: %v", want, err)
	}
	if a, b := blobstoretest.Get(t, src, recordKey(want)), blobstoretest.Get(t, dst, recordKey(want)); !bytes.Equal(a, b) {
		t.Fatalf("the replica's record of %s differs from the source's", want)
	}
	if a, b := restoreElsewhere(t, src, want), restoreElsewhere(t, dst, want); !maps.Equal(a, b) {
		t.Fatalf("the replica restores %s as %v, the source as %v", want, b, a)
	}
}

func TestReplicateCopiesCheckpointsIncrementallyAndVerified(t *testing.T) {
	ctx := t.Context()
	src, mem := newMem(), newMem()
	dst := newLinkStore(mem)
	j := newJob(t, src)
	r := NewReplicator(src, dst, ReplicateOptions{})
	if pass, err := r.Once(ctx); err != nil || len(pass.Copied) != 0 {
		t.Fatalf("a pass before any checkpoint = %+v, %v", pass, err)
	}
	first := j.checkpoint()
	pass, err := r.Once(ctx)
	if err != nil || pass.Replica != first || len(pass.Copied) != 1 {
		t.Fatalf("pass = %+v, %v; want %s copied", pass, err, first)
	}
	replicaHolds(t, src, mem, first)
	if r.RecoveryPoint(time.Now()) != 0 {
		t.Errorf("recovery point %v when caught up, want 0", r.RecoveryPoint(time.Now()))
	}
	second := j.checkpoint()
	pass, err = r.Once(ctx)
	if err != nil || pass.Replica != second || len(pass.Copied) != 1 {
		t.Fatalf("pass = %+v, %v; want %s copied", pass, err, second)
	}
	// Only what the first checkpoint did not have: its new table and
	// MANIFEST. The table it shares is not sent again.
	if c := pass.Copied[0]; c.Objects != 2 || c.SkippedObjects != 1 || c.SkippedBytes != 1001 {
		t.Errorf("second checkpoint copied %d objects, skipped %d (%d bytes); want 2 and 1 (1001 bytes)", c.Objects, c.SkippedObjects, c.SkippedBytes)
	}
	replicaHolds(t, src, mem, second)
	for key, n := range dst.puts {
		if n > 1 && KeyClass(key) != "pointer" && KeyClass(key) != "replication" && KeyClass(key) != "writer" {
			t.Errorf("%s written %d times", key, n)
		}
	}
	st, err := ReadReplicationStatus(ctx, mem)
	if err != nil || st == nil || st.Checkpoint != second || !st.BehindSince.IsZero() || st.Job == "" || !strings.HasPrefix(st.Replicator, replicatorWriter) {
		t.Fatalf("status %+v, %v", st, err)
	}
}

// Every pointer the replicator moves names a checkpoint whose record was
// written before it, and every record comes after each object it names.
func TestReplicateNeverWritesAPointerBeforeItsData(t *testing.T) {
	ctx := t.Context()
	src, mem := newMem(), newMem()
	dst := newLinkStore(mem)
	j := newJob(t, src)
	r := NewReplicator(src, dst, ReplicateOptions{})
	for range 3 {
		j.checkpoint()
		j.checkpoint()
		if _, err := r.Once(ctx); err != nil {
			t.Fatal(err)
		}
	}
	checkWriteOrder(t, mem, dst.written)
}

// checkWriteOrder replays the writes to the replica: each record after
// every object it names, each pointer after the record it names; and
// the final pointer names a record the replicator wrote.
func checkWriteOrder(t *testing.T, final blobstore.Blobstore, written []string) {
	t.Helper()
	present, recorded := map[string]bool{}, map[string]bool{}
	moves := 0
	for i, key := range written {
		if name, id, isPointer := strings.Cut(key, "="); isPointer {
			moves++
			if id != "" && !recorded[id] {
				t.Errorf("write %d: %s moved to %s before its record", i, name, id)
			}
			continue
		}
		present[key] = true
		id, isRecord, ok := checkpointOfKey(key)
		if !ok || !isRecord {
			continue
		}
		recorded[id] = true
		rec, err := New(final, "", Options{}).LoadRecord(t.Context(), id)
		if errors.Is(err, checkpoint.ErrNotFound) {
			continue // dropped by retention since
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, ref := range refsOf(rec) {
			if !present[ref.file.Key] {
				t.Errorf("write %d: the record of %s before its object %s", i, id, ref.file.Key)
			}
		}
	}
	if moves == 0 {
		t.Error("no pointer was moved")
	}
	id, err := New(final, "", Options{}).PointerID(t.Context(), PointerLatestCompleted)
	if err != nil || (id != "" && !recorded[id]) {
		t.Errorf("the final pointer names %q (%v), whose record the replicator never wrote", id, err)
	}
}

// The replicator is killed (its context cancelled) before each call it
// makes to the replica in turn, and restarted (a new Replicator) after
// each kill. After every kill the replica's latest completed checkpoint
// verifies; the last restart catches up; and no object was written
// twice: an interrupted replication resumes without resending.
func TestReplicateKilledAtEveryStepResumesWithoutResending(t *testing.T) {
	src, mem := newMem(), newMem()
	dst := newLinkStore(mem)
	j := newJob(t, src)
	r := NewReplicator(src, dst, ReplicateOptions{})
	j.checkpoint()
	if _, err := r.Once(t.Context()); err != nil {
		t.Fatal(err)
	}
	j.checkpoint()
	want := j.checkpoint()
	kills := 0
	for at := 1; ; at++ {
		ctx, cancel := context.WithCancel(t.Context())
		dst.mu.Lock()
		dst.calls, dst.at, dst.cancel = 0, at, cancel
		dst.mu.Unlock()
		_, err := NewReplicator(src, dst, ReplicateOptions{}).Once(ctx)
		cancel()
		dst.mu.Lock()
		dst.at, dst.cancel = 0, nil
		dst.mu.Unlock()
		if err == nil {
			break
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("killed before call %d: %v, want context.Canceled", at, err)
		}
		kills++
		if id, _ := New(mem, "", Options{}).PointerID(t.Context(), PointerLatestCompleted); id != "" {
			if err := New(mem, "", Options{}).Verify(t.Context(), id); err != nil {
				t.Fatalf("killed before call %d: the replica's latest completed %s does not verify: %v", at, id, err)
			}
		}
		if at > 500 {
			t.Fatal("the replicator never completed a pass")
		}
	}
	if kills < 10 {
		t.Fatalf("only %d kills: the test proves little", kills)
	}
	replicaHolds(t, src, mem, want)
	for key, n := range dst.puts {
		switch KeyClass(key) {
		case "shared", "private":
			if n > 1 {
				t.Errorf("%s sent %d times across the kills", key, n)
			}
		}
	}
	checkWriteOrder(t, mem, dst.written)
}

// With the link to the replica cut for several checkpoints, the recovery
// point grows from when the source completed the first checkpoint the
// replica lacks; once the link is back, one pass catches up (only the
// newest Keep are copied) and the recovery point is 0 again.
func TestReplicateCatchesUpAfterTheLinkIsCut(t *testing.T) {
	ctx := t.Context()
	src, mem := newMem(), newMem()
	dst := newLinkStore(mem)
	j := newJob(t, src)
	r := NewReplicator(src, dst, ReplicateOptions{Keep: 2, GCEvery: 1})
	j.checkpoint()
	if _, err := r.Once(ctx); err != nil {
		t.Fatal(err)
	}
	dst.setCut(true)
	missing := j.checkpoint()
	rec, err := j.s.LoadRecord(ctx, missing)
	if err != nil || rec.CompletedAt.IsZero() {
		t.Fatalf("record of %s: completed at %v, %v", missing, rec.CompletedAt, err)
	}
	for range 4 {
		j.checkpoint()
	}
	if _, err := r.Once(ctx); !errors.Is(err, errLinkCut) {
		t.Fatalf("a pass with the link cut = %v, want it to fail", err)
	}
	at := rec.CompletedAt.Add(42 * time.Second)
	if rp := r.RecoveryPoint(at); rp != 42*time.Second {
		t.Fatalf("recovery point 42 s after the source completed %s = %v", missing, rp)
	}
	dst.setCut(false)
	pass, err := r.Once(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(pass.Copied); got != 2 {
		t.Fatalf("catching up copied %d checkpoints, want the newest 2 (Keep)", got)
	}
	replicaHolds(t, src, mem, checkpoint.NewID(j.seq))
	if rp := r.RecoveryPoint(time.Now()); rp != 0 {
		t.Fatalf("recovery point %v after catching up", rp)
	}
	ids, _ := New(mem, "", Options{}).IDs(ctx)
	if len(ids) != 2 {
		t.Fatalf("the replica holds %v, want the newest 2 (Keep)", ids)
	}
}

// A second replicator fences the first, as a second writer would.
func TestReplicateSecondReplicatorFencesTheFirst(t *testing.T) {
	ctx := t.Context()
	src, dst := newMem(), newMem()
	j := newJob(t, src)
	j.checkpoint()
	r1 := NewReplicator(src, dst, ReplicateOptions{Name: "one"})
	if _, err := r1.Once(ctx); err != nil {
		t.Fatal(err)
	}
	r2 := NewReplicator(src, dst, ReplicateOptions{Name: "two"})
	if err := r2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	want := j.checkpoint()
	if _, err := r1.Once(ctx); !errors.Is(err, checkpoint.ErrFenced) {
		t.Fatalf("the first replicator after the second started: %v, want ErrFenced", err)
	}
	if err := r1.Run(ctx); !errors.Is(err, checkpoint.ErrFenced) {
		t.Fatalf("Run of the fenced replicator = %v, want ErrFenced", err)
	}
	if _, err := r2.Once(ctx); err != nil {
		t.Fatal(err)
	}
	replicaHolds(t, src, dst, want)
	if st, _ := ReadReplicationStatus(ctx, dst); st == nil || st.Replicator != replicatorWriter+"two" {
		t.Fatalf("status %+v, want the second replicator's", st)
	}
}

// A job failing over to the replica takes its writer role there: the
// replicator is fenced, a new one refuses to take the replica back, and
// the job resumes the same job from the latest checkpoint copied, its
// next save above every copied record's epoch - even over the record an
// interrupted copy left at the id it saves next.
func TestReplicaTakenOverByAJob(t *testing.T) {
	ctx := t.Context()
	src, mem := newMem(), newMem()
	dst := newLinkStore(mem)
	j := newJob(t, src)
	for range 3 { // the source's writer epoch climbs above the replica's
		if _, err := j.s.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
	}
	r := NewReplicator(src, dst, ReplicateOptions{})
	last := j.checkpoint()
	if _, err := r.Once(ctx); err != nil {
		t.Fatal(err)
	}
	// Kill the replicator right after it wrote the next record.
	next := j.checkpoint()
	ctx2, cancel := context.WithCancel(ctx)
	r2 := NewReplicator(src, &cancelAfter{Blobstore: mem, key: recordKey(next), cancel: cancel}, ReplicateOptions{})
	if _, err := r2.Once(ctx2); !errors.Is(err, context.Canceled) {
		t.Fatalf("the killed pass = %v", err)
	}
	if ok, _ := mem.Exists(ctx, recordKey(next)); !ok {
		t.Fatal("the test meant to leave a record without its pointer")
	}

	// The failover: a job's writer on the replica.
	b := newWriter(t, mem, Options{})
	if _, err := r.Once(ctx); !errors.Is(err, checkpoint.ErrFenced) {
		t.Fatalf("the replicator after the failover: %v, want ErrFenced", err)
	}
	before := snapshot(t, mem)
	if err := NewReplicator(src, mem, ReplicateOptions{}).Start(ctx); !errors.Is(err, ErrNotReplica) {
		t.Fatalf("a new replicator onto the failed-over replica: %v, want ErrNotReplica", err)
	}
	if after := snapshot(t, mem); !maps.Equal(before, after) {
		t.Fatal("the refused replicator changed the replica")
	}
	latest, err := b.LoadLatestCompleted(ctx)
	if err != nil || latest.ID != last {
		t.Fatalf("the job on the replica resumes from %v, %v; want %s", idOf(latest), err, last)
	}
	srcRec, _ := j.s.LoadRecord(ctx, last)
	if b.Epoch() <= srcRec.Epoch {
		t.Fatalf("the job's epoch on the replica %d, not above the copied records' %d", b.Epoch(), srcRec.Epoch)
	}
	d := record(next, checkpoint.StatusCompleted)
	d.JobID = ""
	d.StateDirs = writeState(t, b, next, stateFiles{"w0": {"MANIFEST": "the job on the replica"}})
	if err := b.Save(ctx, d); err != nil {
		t.Fatalf("the job's save on the replica over the interrupted copy's record: %v", err)
	}
	got, _ := b.LoadRecord(ctx, next)
	if got.JobID != srcRec.JobID || got.Epoch != b.Epoch() {
		t.Fatalf("the job's record: job %q epoch %d; want the source's job %q and epoch %d", got.JobID, got.Epoch, srcRec.JobID, b.Epoch())
	}
}

// cancelAfter cancels the replicator's context once key was written.
type cancelAfter struct {
	blobstore.Blobstore
	key    string
	cancel func()
}

func (c *cancelAfter) PutIfAbsent(ctx context.Context, key string, r io.Reader) (string, error) {
	etag, err := c.Blobstore.PutIfAbsent(ctx, key, r)
	if key == c.key {
		c.cancel()
	}
	return etag, err
}

func (c *cancelAfter) Unwrap() blobstore.Blobstore { return c.Blobstore }

// A replica holding another job's checkpoints is refused before anything
// is written.
func TestReplicateRefusesAReplicaOfAnotherJob(t *testing.T) {
	ctx := t.Context()
	src, dst := newMem(), newMem()
	newJob(t, src).checkpoint()
	other := NewReplicator(newMem(), dst, ReplicateOptions{})
	otherJob := newJob(t, other.src.bs)
	otherJob.checkpoint()
	if _, err := other.Once(ctx); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, dst)
	err := NewReplicator(src, dst, ReplicateOptions{}).Start(ctx)
	if !errors.Is(err, checkpoint.ErrOtherJob) {
		t.Fatalf("Start onto a replica of another job = %v, want ErrOtherJob", err)
	}
	if after := snapshot(t, dst); !maps.Equal(before, after) {
		t.Fatal("the refusal changed the replica")
	}
}

// A damaged object in the source is not copied: the pass fails with
// ErrCorrupt, nothing of it is visible in the replica, and the
// replica's latest completed checkpoint stays the one before.
func TestReplicateRefusesADamagedObject(t *testing.T) {
	ctx := t.Context()
	src, dst := newMem(), newMem()
	j := newJob(t, src)
	first := j.checkpoint()
	r := NewReplicator(src, dst, ReplicateOptions{})
	if _, err := r.Once(ctx); err != nil {
		t.Fatal(err)
	}
	second := j.checkpoint()
	rec, _ := j.s.LoadRecord(ctx, second)
	var victim FileRef
	for _, f := range rec.Files["w0"] {
		if rec.Introduced("w0", f) && strings.HasSuffix(f.Path, ".sst") {
			victim = f
		}
	}
	b := blobstoretest.Get(t, src, victim.Key)
	b[0] ^= 0xff
	if err := src.Put(ctx, victim.Key, bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Once(ctx); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a pass over a damaged object = %v, want ErrCorrupt", err)
	}
	if ok, _ := dst.Exists(ctx, victim.Key); ok {
		t.Error("the damaged object is in the replica")
	}
	replicaHolds(t, src, dst, first)
}

// A checkpoint saved from workers' parts and one holding remote objects
// (state in remote mode, here imported) replicate with every object.
func TestReplicateCopiesPartsAndRemoteObjects(t *testing.T) {
	ctx := t.Context()
	src, dst := newMem(), newMem()
	coord := newWriter(t, src, Options{})
	w := newTestWorker(t, src, "w1")
	if err := coord.Assign(assignment(map[*Worker][]string{w: {"a"}})); err != nil {
		t.Fatal(err)
	}
	fromParts := checkpoint.NewID(1)
	savePart(t, w, coord.Epoch(), fromParts, stateFiles{"a": {"000001.sst": "table a", "MANIFEST": "m a"}})
	if err := coord.Save(ctx, record(fromParts, checkpoint.StatusCompleted)); err != nil {
		t.Fatal(err)
	}
	r := NewReplicator(src, dst, ReplicateOptions{})
	if _, err := r.Once(ctx); err != nil {
		t.Fatal(err)
	}
	replicaHolds(t, src, dst, fromParts)

	remote := New(src, t.TempDir(), Options{})
	if _, err := remote.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	withRemote := checkpoint.NewID(2)
	obj := []byte("an sst pebble wrote to the store")
	sum := sha256.Sum256(obj)
	objects := []archive.File{{Path: RemotePrefix + "/w0/e9-abc/000007.sst", Size: int64(len(obj)), SHA256: hex.EncodeToString(sum[:])}}
	d := record(withRemote, checkpoint.StatusCompleted)
	d.StateDirs = writeState(t, remote, withRemote, stateFiles{"w0": {"MANIFEST": "m"}})
	open := func(context.Context, string) (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(obj)), nil }
	if err := remote.SaveImported(ctx, d, objects, open); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Once(ctx); err != nil {
		t.Fatal(err)
	}
	replicaHolds(t, src, dst, withRemote)
	if got := blobstoretest.Get(t, dst, objects[0].Path); !bytes.Equal(got, obj) {
		t.Fatalf("remote object in the replica = %q", got)
	}
}

// stallStore is the replica over a link that stalls: once stall is set,
// every call waits until it is cleared (or its context ends).
type stallStore struct {
	blobstore.Blobstore
	mu      sync.Mutex
	stalled chan struct{} // nil: flowing
	after   string        // stall once this key was written naming afterID
	afterID string
}

func (s *stallStore) gate(ctx context.Context) error {
	s.mu.Lock()
	ch := s.stalled
	s.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *stallStore) wrote(key string, body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if key == s.after && s.stalled == nil && bytes.Contains(body, []byte(s.afterID)) {
		s.stalled = make(chan struct{})
	}
}

func (s *stallStore) flow() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stalled != nil {
		close(s.stalled)
		s.stalled, s.after = nil, ""
	}
}

func (s *stallStore) PutIfMatch(ctx context.Context, key, match string, r io.Reader) (string, error) {
	if err := s.gate(ctx); err != nil {
		return "", err
	}
	b, _ := io.ReadAll(r)
	etag, err := s.Blobstore.PutIfMatch(ctx, key, match, bytes.NewReader(b))
	if err == nil {
		s.wrote(key, b)
	}
	return etag, err
}

func (s *stallStore) Put(ctx context.Context, key string, r io.Reader) error {
	if err := s.gate(ctx); err != nil {
		return err
	}
	return s.Blobstore.Put(ctx, key, r)
}

func (s *stallStore) PutIfAbsent(ctx context.Context, key string, r io.Reader) (string, error) {
	if err := s.gate(ctx); err != nil {
		return "", err
	}
	return s.Blobstore.PutIfAbsent(ctx, key, r)
}

func (s *stallStore) Stat(ctx context.Context, key string) (blobstore.ObjectInfo, error) {
	if err := s.gate(ctx); err != nil {
		return blobstore.ObjectInfo{}, err
	}
	return s.Blobstore.Stat(ctx, key)
}

func (s *stallStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := s.gate(ctx); err != nil {
		return nil, err
	}
	return s.Blobstore.Get(ctx, key)
}

func (s *stallStore) Unwrap() blobstore.Blobstore { return s.Blobstore }

// The link stalls right after the replica's pointer moved, so the pass
// hangs in its last steps and polls no more: the recovery point still
// grows once the source completes another checkpoint (Run's watcher
// reads the source alone), and falls to 0 once the link flows again.
func TestReplicateRecoveryPointGrowsWhileAPassHangs(t *testing.T) {
	ctx := t.Context()
	src, mem := newMem(), newMem()
	dst := &stallStore{Blobstore: mem}
	j := newJob(t, src)
	first := j.checkpoint()
	r := NewReplicator(src, dst, ReplicateOptions{Interval: 10 * time.Millisecond})
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	dst.mu.Lock()
	dst.after, dst.afterID = keyLatestCompleted, `"id": "`+first+`"`
	dst.mu.Unlock()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(runCtx) }()
	waitUntil(t, "the first checkpoint copied", func() bool {
		id, _ := New(mem, "", Options{}).PointerID(ctx, PointerLatestCompleted)
		return id == first
	})
	second := j.checkpoint()
	waitUntil(t, "a recovery point while the pass hangs", func() bool { return r.RecoveryPoint(time.Now()) > 0 })
	dst.flow()
	waitUntil(t, "the replica to catch up", func() bool {
		id, _ := New(mem, "", Options{}).PointerID(ctx, PointerLatestCompleted)
		return id == second && r.RecoveryPoint(time.Now()) == 0
	})
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10 s for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A checkpoint the source's retention drops while it is being copied
// (the replica lagged) is no damage: the pass fails, Run goes on, and the
// next pass copies a newer one.
func TestReplicateSkipsACheckpointTheSourceDroppedMidCopy(t *testing.T) {
	ctx := t.Context()
	src, dst := newMem(), newMem()
	j := newJob(t, src)
	j.checkpoint()
	r := NewReplicator(src, &dropping{Blobstore: dst, src: src, t: t}, ReplicateOptions{})
	second := j.checkpoint()
	_, err := r.Once(ctx)
	if err == nil || fatal(err) || !errors.Is(err, errSourceDropped) {
		t.Fatalf("a pass over a dropped checkpoint = %v, want errSourceDropped (not fatal)", err)
	}
	third := j.checkpoint()
	if _, err := r.Once(ctx); err != nil {
		t.Fatal(err)
	}
	replicaHolds(t, src, dst, third)
	_ = second
}

// dropping deletes, at the replica's first object write, the source's
// checkpoint 2, as the source's GC would.
type dropping struct {
	blobstore.Blobstore
	src  blobstore.Blobstore
	t    *testing.T
	once sync.Once
}

func (d *dropping) Put(ctx context.Context, key string, r io.Reader) error {
	d.once.Do(func() {
		// Its record and private files: its tables are shared with
		// the checkpoints after it, which GC keeps.
		for _, k := range blobstoretest.ListKeys(d.t, d.src, dirCheckpoints+checkpoint.NewID(2)+"/") {
			_ = d.src.Delete(ctx, k)
		}
	})
	return d.Blobstore.Put(ctx, key, r)
}

func (d *dropping) Unwrap() blobstore.Blobstore { return d.Blobstore }

// A replica whose store encrypts under another key, or not at all, holds
// the files as it encrypts them, and its record names its own key id (or
// none): it restores with its own key as the source does with the
// source's, and a second pass finds the record in place.
func TestReplicateUnderAnotherKeyRecordsTheReplicasKey(t *testing.T) {
	ctx := t.Context()
	newKey := func(seed byte) encrypted.Key {
		k, err := encrypted.NewKey("", bytes.Repeat([]byte{seed}, encrypted.KeySize))
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	wrapped := func(k encrypted.Key) blobstore.Blobstore {
		bs, err := encrypted.New(newMem(), k, encrypted.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return bs
	}
	k1, k2 := newKey(61), newKey(62)
	src := wrapped(k1)
	id := newJob(t, src).checkpoint()
	if rec, err := New(src, "", Options{}).LoadRecord(ctx, id); err != nil || rec.EncryptionKeyID != k1.ID {
		t.Fatalf("the source's record: %v; want key id %s", err, k1.ID)
	}
	for name, c := range map[string]struct {
		dst  blobstore.Blobstore
		want string
	}{"another key": {wrapped(k2), k2.ID}, "plain": {newMem(), ""}} {
		r := NewReplicator(src, c.dst, ReplicateOptions{})
		for range 2 {
			if _, err := r.Once(ctx); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		rec, err := New(c.dst, "", Options{}).LoadRecord(ctx, id)
		if err != nil || rec.EncryptionKeyID != c.want {
			t.Fatalf("%s: the replica's record names key id %q (%v), want %q", name, rec.EncryptionKeyID, err, c.want)
		}
		if a, b := restoreElsewhere(t, src, id), restoreElsewhere(t, c.dst, id); !maps.Equal(a, b) {
			t.Fatalf("%s: the replica restores %s as %v, the source as %v", name, id, b, a)
		}
	}
}
