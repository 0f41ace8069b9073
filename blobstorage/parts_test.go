package blobstorage

import (
	"maps"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
)

// planGC's existing rules cover parts, because every key of a part lives
// under checkpoints/<id>/ or shared/<owner>/<id>-…: parts of a
// checkpoint that never committed are files without a record (in
// progress within Grace, orphans after), and the part files a committed
// checkpoint references — its own and those reused from an earlier
// worker's upload — are kept with it.
func TestPlanGCRulesForParts(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	old, young := now.Add(-3*time.Hour), now.Add(-time.Minute)
	opts := Options{Keep: 1, Grace: time.Hour, PinTTL: time.Hour}.withDefaults()
	id := checkpoint.NewID
	obj := func(key string, at time.Time) blobstore.ObjectInfo {
		return blobstore.ObjectInfo{Key: key, Size: 7, ModTime: at}
	}
	// parts lists checkpoint n's part of owner "op" by worker w: its record
	// and one private file; with a record, the checkpoint committed and
	// references them and the shared files in refs.
	parts := func(n uint64, w string, at time.Time, committed bool, refs ...string) *listedCheckpoint {
		c := &listedCheckpoint{id: id(n), newest: at, objects: []blobstore.ObjectInfo{
			obj(partKey(id(n), 1, "op", w), at), obj(workerPrivateKey(id(n), 1, "op", w, "MANIFEST"), at),
		}}
		if !committed {
			return c
		}
		c.hasRecord, c.recordInfo = true, obj(recordKey(id(n)), at)
		c.objects = append(c.objects, c.recordInfo)
		d := record(id(n), checkpoint.StatusCompleted)
		d.StateDirs = map[string]string{"op": "op"}
		files := []FileRef{{Path: "MANIFEST", Key: workerPrivateKey(id(n), 1, "op", w, "MANIFEST"), Size: 7}}
		for i, k := range refs {
			files = append(files, FileRef{Path: string(rune('a'+i)) + ".sst", Key: k, Size: 7})
		}
		c.record = &Record{CheckpointData: d, Epoch: 1, Files: map[string][]FileRef{"op": files}, Workers: map[string]string{"op": w}}
		return c
	}
	sh1 := workerSharedKey(id(1), 1, "op", "w1", "1.sst") // w1's upload, reused by w2 after a restore
	sh2 := workerSharedKey(id(2), 1, "op", "w2", "2.sst")
	sh3 := workerSharedKey(id(3), 1, "op", "w2", "3.sst") // uncommitted, young
	sh4 := workerSharedKey(id(4), 1, "op", "w2", "4.sst") // uncommitted, old
	inv := inventory{
		checkpoints: []*listedCheckpoint{
			parts(1, "w1", old, true, sh1),
			parts(2, "w2", old, true, sh1, sh2),
			parts(3, "w2", young, false),
			parts(4, "w2", old, false),
		},
		shared:          []blobstore.ObjectInfo{obj(sh1, old), obj(sh2, old), obj(sh3, young), obj(sh4, old)},
		latest:          id(2),
		latestCompleted: id(2),
	}
	p := planGC(inv, now, opts)
	got := map[string]Reason{}
	for _, v := range p.verdicts {
		got[v.ID] = v.Reason
	}
	want := map[string]Reason{id(1): DropOld, id(2): KeepLatestCompleted, id(3): KeepInProgress, id(4): DropOrphan}
	if !maps.Equal(got, want) {
		t.Fatalf("verdicts %v, want %v", got, want)
	}
	gotDel := map[string]Reason{}
	for _, d := range p.deletions {
		gotDel[d.Key] = d.Reason
	}
	wantDel := map[string]Reason{
		recordKey(id(1)):                                   DropOld,
		partKey(id(1), 1, "op", "w1"):                      DropOld,
		workerPrivateKey(id(1), 1, "op", "w1", "MANIFEST"): DropOld,
		partKey(id(4), 1, "op", "w2"):                      DropOrphan,
		workerPrivateKey(id(4), 1, "op", "w2", "MANIFEST"): DropOrphan,
		sh4: DropUnreferenced,
	}
	if !maps.Equal(gotDel, wantDel) {
		t.Fatalf("deletions %v, want %v", gotDel, wantDel)
	}
	// The keys of parts are in the layout GC knows.
	for _, k := range []string{partKey(id(1), 7, "op", "w1"), workerPrivateKey(id(1), 7, "op", "w1", "x/MANIFEST")} {
		if cid, isRecord, ok := checkpointOfKey(k); !ok || isRecord || cid != id(1) {
			t.Errorf("checkpointOfKey(%s) = %s, %v, %v", k, cid, isRecord, ok)
		}
	}
	if k := workerSharedKey(id(1), 7, "op", "w1", "1.sst"); !isSharedKey(k) || !introducedBy(k, "op", id(1)) || introducedBy(k, "op", id(2)) {
		t.Errorf("%s: not a shared key introduced by %s", k, id(1))
	}
}
