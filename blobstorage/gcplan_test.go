package blobstorage

import (
	"slices"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
)

// The retention rules of planGC, one row each, without a store.
func TestPlanGCRules(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	old, young := now.Add(-3*time.Hour), now.Add(-time.Minute)
	opts := Options{Keep: 2, Grace: time.Hour, PinTTL: time.Hour}.withDefaults()
	id := checkpoint.NewID
	// cp lists checkpoint n with a record of status st (""=no record,
	// "unreadable"=a record that could not be read) written at t, one
	// private file, and a shared file it references.
	cp := func(n uint64, st string, at time.Time) *listedCheckpoint {
		c := &listedCheckpoint{id: id(n), newest: at}
		priv := blobstore.ObjectInfo{Key: privateKey(id(n), 1, "op", "MANIFEST"), Size: 10, ModTime: at}
		c.objects = []blobstore.ObjectInfo{priv}
		if st == "" {
			return c
		}
		c.hasRecord = true
		c.recordInfo = blobstore.ObjectInfo{Key: recordKey(id(n)), Size: 100, ModTime: at}
		c.objects = append(c.objects, c.recordInfo)
		if st != "unreadable" {
			d := record(id(n), checkpoint.Status(st))
			d.StateDirs = map[string]string{"op": "op"}
			c.record = &Record{CheckpointData: d, Epoch: 1, Files: map[string][]FileRef{"op": {
				{Path: "MANIFEST", Key: priv.Key, Size: 10},
				{Path: "1.sst", Key: sharedKey(id(n), 1, "op", "1.sst"), Size: 5},
			}}}
		}
		return c
	}
	withObjects := func(c *listedCheckpoint, objs ...blobstore.ObjectInfo) *listedCheckpoint {
		c.objects = append(c.objects, objs...)
		return c
	}
	// orphanOf marks the keys of c (no record) as written under epoch e.
	orphanOf := func(c *listedCheckpoint, e uint64) *listedCheckpoint {
		c.epochs = map[uint64]bool{e: true}
		return c
	}
	shared := func(n uint64, at time.Time) blobstore.ObjectInfo {
		return blobstore.ObjectInfo{Key: sharedKey(id(n), 1, "op", "1.sst"), Size: 5, ModTime: at}
	}
	pin := func(n uint64, at time.Time) blobstore.ObjectInfo {
		return blobstore.ObjectInfo{Key: pinKey(id(n), "nonce"), ModTime: at}
	}
	// withRemote makes c's record reference the remote objects keys.
	withRemote := func(c *listedCheckpoint, keys ...string) *listedCheckpoint {
		c.record.Remote = map[string][]RemoteRef{}
		for _, k := range keys {
			c.record.Remote["op"] = append(c.record.Remote["op"], RemoteRef{Key: k, Size: 7})
		}
		return c
	}
	// robj is a remote object created by a writer of epoch e (its open
	// "n"), at t.
	rkey := func(e uint64, n, name string) string {
		return "remote/op/" + RemoteGeneration(e) + "-" + n + "/" + name
	}
	robj := func(key string, at time.Time) blobstore.ObjectInfo {
		return blobstore.ObjectInfo{Key: key, Size: 7, ModTime: at}
	}
	done := string(checkpoint.StatusCompleted)
	prep := string(checkpoint.StatusPrepared)

	for _, tc := range []struct {
		name    string
		inv     inventory
		want    map[string]Reason // id → reason
		deleted map[string]Reason // key → reason (exactly these)
		// liveKept is how many unreferenced remote objects are kept for
		// being under the live writer's generation.
		liveKept int
	}{
		{
			name: "the Keep newest completed checkpoints up to _latest-completed are kept, older ones dropped record first",
			inv:  inventory{checkpoints: []*listedCheckpoint{cp(1, done, old), cp(2, done, old), cp(3, done, old)}, latest: id(3), latestCompleted: id(3)},
			want: map[string]Reason{id(1): DropOld, id(2): KeepNewest, id(3): KeepLatestCompleted},
			deleted: map[string]Reason{
				recordKey(id(1)):                       DropOld,
				privateKey(id(1), 1, "op", "MANIFEST"): DropOld,
			},
		},
		{
			name: "a prepared checkpoint older than _latest-completed is abandoned",
			inv:  inventory{checkpoints: []*listedCheckpoint{cp(1, prep, old), cp(2, done, old)}, latest: id(2), latestCompleted: id(2)},
			want: map[string]Reason{id(1): DropAbandoned, id(2): KeepLatestCompleted},
			deleted: map[string]Reason{
				recordKey(id(1)):                       DropAbandoned,
				privateKey(id(1), 1, "op", "MANIFEST"): DropAbandoned,
			},
		},
		{
			name: "_latest is kept even when prepared (Recover reads it)",
			inv:  inventory{checkpoints: []*listedCheckpoint{cp(1, done, old), cp(2, prep, old)}, latest: id(2), latestCompleted: id(1)},
			want: map[string]Reason{id(1): KeepLatestCompleted, id(2): KeepLatest},
		},
		{
			name: "a record newer than _latest-completed is a save in progress within Grace, stale after",
			inv:  inventory{checkpoints: []*listedCheckpoint{cp(1, done, old), cp(2, prep, young), cp(3, prep, old)}, latest: id(1), latestCompleted: id(1)},
			want: map[string]Reason{id(1): KeepLatestCompleted, id(2): KeepInProgress, id(3): DropStale},
			deleted: map[string]Reason{
				recordKey(id(3)):                       DropStale,
				privateKey(id(3), 1, "op", "MANIFEST"): DropStale,
			},
		},
		{
			name: "files without a record are a save in progress within Grace, an orphan after",
			inv:  inventory{checkpoints: []*listedCheckpoint{cp(1, done, old), cp(2, "", young), cp(3, "", old)}, latest: id(1), latestCompleted: id(1)},
			want: map[string]Reason{id(1): KeepLatestCompleted, id(2): KeepInProgress, id(3): DropOrphan},
			deleted: map[string]Reason{
				privateKey(id(3), 1, "op", "MANIFEST"): DropOrphan,
			},
		},
		{
			name: "another epoch's files under a kept checkpoint's id, which its record does not name, go after Grace",
			inv: inventory{checkpoints: []*listedCheckpoint{withObjects(cp(1, done, old),
				blobstore.ObjectInfo{Key: privateKey(id(1), 2, "op", "MANIFEST"), Size: 9, ModTime: old},
				blobstore.ObjectInfo{Key: privateKey(id(1), 3, "op", "MANIFEST"), Size: 9, ModTime: young})}, latest: id(1), latestCompleted: id(1)},
			want: map[string]Reason{id(1): KeepLatestCompleted},
			deleted: map[string]Reason{
				privateKey(id(1), 2, "op", "MANIFEST"): DropLeftover,
			},
		},
		{
			name: "run by anyone but the live writer, its work newer than _latest is kept whatever its age, with the tables it uploaded",
			inv: inventory{checkpoints: []*listedCheckpoint{cp(1, done, old), cp(2, prep, old), orphanOf(cp(3, "", old), 1)},
				shared: []blobstore.ObjectInfo{shared(3, old)}, latest: id(1), latestCompleted: id(1), writerEpoch: 1, otherWriter: 1},
			want: map[string]Reason{id(1): KeepLatestCompleted, id(2): KeepLiveWriter, id(3): KeepLiveWriter},
		},
		{
			name: "a dead writer's work newer than _latest goes after Grace: the live writer is another epoch",
			inv: inventory{checkpoints: []*listedCheckpoint{cp(1, done, old), cp(2, prep, old), orphanOf(cp(3, "", old), 1)},
				shared: []blobstore.ObjectInfo{shared(3, old)}, latest: id(1), latestCompleted: id(1), writerEpoch: 2, otherWriter: 2},
			want: map[string]Reason{id(1): KeepLatestCompleted, id(2): DropStale, id(3): DropOrphan},
			deleted: map[string]Reason{
				recordKey(id(2)):                       DropStale,
				privateKey(id(2), 1, "op", "MANIFEST"): DropStale,
				privateKey(id(3), 1, "op", "MANIFEST"): DropOrphan,
				sharedKey(id(3), 1, "op", "1.sst"):     DropUnreferenced,
			},
		},
		{
			name: "a pinned checkpoint is kept; an expired pin is deleted and protects nothing",
			inv: inventory{checkpoints: []*listedCheckpoint{cp(1, done, old), cp(2, done, old), cp(3, done, old), cp(4, done, old)},
				pins: []blobstore.ObjectInfo{pin(1, young), pin(2, old)}, latest: id(4), latestCompleted: id(4)},
			want: map[string]Reason{id(1): KeepPinned, id(2): DropOld, id(3): KeepNewest, id(4): KeepLatestCompleted},
			deleted: map[string]Reason{
				recordKey(id(2)):                       DropOld,
				privateKey(id(2), 1, "op", "MANIFEST"): DropOld,
				pinKey(id(2), "nonce"):                 DropExpiredPin,
			},
		},
		{
			name: "shared files nobody kept references go after Grace; young ones and referenced ones stay",
			inv: inventory{checkpoints: []*listedCheckpoint{cp(1, done, old), cp(2, done, old), cp(3, done, old)},
				shared: []blobstore.ObjectInfo{shared(1, old), shared(2, old), shared(3, old), shared(9, old), shared(8, young)}, latest: id(3), latestCompleted: id(3)},
			want: map[string]Reason{id(1): DropOld, id(2): KeepNewest, id(3): KeepLatestCompleted},
			deleted: map[string]Reason{
				recordKey(id(1)):                       DropOld,
				privateKey(id(1), 1, "op", "MANIFEST"): DropOld,
				sharedKey(id(1), 1, "op", "1.sst"):     DropUnreferenced,
				sharedKey(id(9), 1, "op", "1.sst"):     DropUnreferenced,
			},
		},
		{
			name: "an unreadable record is kept, and while one is no shared file is deleted",
			inv: inventory{checkpoints: []*listedCheckpoint{cp(1, done, old), cp(2, done, old), cp(3, "unreadable", old), cp(4, done, old)},
				shared: []blobstore.ObjectInfo{shared(1, old), shared(9, old)}, latest: id(4), latestCompleted: id(4)},
			want: map[string]Reason{id(1): DropOld, id(2): KeepNewest, id(3): KeepUnreadable, id(4): KeepLatestCompleted},
			deleted: map[string]Reason{
				recordKey(id(1)):                       DropOld,
				privateKey(id(1), 1, "op", "MANIFEST"): DropOld,
			},
		},
		{
			name: "no completed checkpoint yet: old prepared records are stale, nothing counts as newest",
			inv:  inventory{checkpoints: []*listedCheckpoint{cp(1, prep, old), cp(2, prep, young)}, latest: id(2)},
			want: map[string]Reason{id(1): DropStale, id(2): KeepLatest},
			deleted: map[string]Reason{
				recordKey(id(1)):                       DropStale,
				privateKey(id(1), 1, "op", "MANIFEST"): DropStale,
			},
		},
		{
			name: "remote objects: a kept record's are kept (pins included), a dropped one's go after Grace, young ones stay",
			inv: inventory{checkpoints: []*listedCheckpoint{
				withRemote(cp(1, done, old), rkey(1, "a", "1.sst")),
				withRemote(cp(2, done, old), rkey(1, "a", "2.sst")),
				withRemote(cp(3, done, old), rkey(1, "a", "3.sst")),
				withRemote(cp(4, done, old), rkey(1, "a", "4.sst")),
				withRemote(cp(5, done, old), rkey(1, "a", "5.sst")),
			},
				pins:   []blobstore.ObjectInfo{pin(1, young)},
				remote: []blobstore.ObjectInfo{robj(rkey(1, "a", "1.sst"), old), robj(rkey(1, "a", "2.sst"), old), robj(rkey(1, "a", "3.sst"), old), robj(rkey(1, "a", "4.sst"), old), robj(rkey(1, "a", "5.sst"), old), robj(rkey(1, "a", "6.sst"), young)},
				latest: id(5), latestCompleted: id(5), writerEpoch: 2},
			want: map[string]Reason{id(1): KeepPinned, id(2): DropOld, id(3): DropOld, id(4): KeepNewest, id(5): KeepLatestCompleted},
			deleted: map[string]Reason{
				recordKey(id(2)): DropOld, privateKey(id(2), 1, "op", "MANIFEST"): DropOld,
				recordKey(id(3)): DropOld, privateKey(id(3), 1, "op", "MANIFEST"): DropOld,
				rkey(1, "a", "2.sst"): DropRemoteUnreferenced,
				rkey(1, "a", "3.sst"): DropRemoteUnreferenced,
			},
		},
		{
			name: "remote objects of the live writer's generation are left alone by a GC that is not that writer; fenced epochs' go",
			inv: inventory{checkpoints: []*listedCheckpoint{withRemote(cp(1, done, old), rkey(3, "a", "1.sst"))},
				remote: []blobstore.ObjectInfo{robj(rkey(3, "a", "1.sst"), old), robj(rkey(3, "a", "9.sst"), old), robj(rkey(2, "z", "9.sst"), old), robj(rkey(4, "b", "9.sst"), old)},
				latest: id(1), latestCompleted: id(1), writerEpoch: 4},
			want: map[string]Reason{id(1): KeepLatestCompleted},
			deleted: map[string]Reason{
				rkey(3, "a", "9.sst"): DropRemoteUnreferenced,
				rkey(2, "z", "9.sst"): DropRemoteUnreferenced,
			},
			liveKept: 1,
		},
		{
			name: "the writer's own GC keeps what its state uses and other opens of its generation, and deletes its own obsolete objects",
			inv: inventory{checkpoints: []*listedCheckpoint{withRemote(cp(1, done, old), rkey(4, "b", "1.sst"))},
				remote: []blobstore.ObjectInfo{robj(rkey(4, "b", "1.sst"), old), robj(rkey(4, "b", "2.sst"), old), robj(rkey(4, "b", "3.sst"), old), robj(rkey(4, "b", "4.sst"), young), robj(rkey(4, "c", "9.sst"), old), robj(rkey(3, "a", "9.sst"), old)},
				latest: id(1), latestCompleted: id(1), writerEpoch: 4,
				live: &liveRemote{keys: map[string]bool{rkey(4, "b", "2.sst"): true}, prefixes: []string{"remote/op/e4-b/"}}},
			want: map[string]Reason{id(1): KeepLatestCompleted},
			deleted: map[string]Reason{
				rkey(4, "b", "3.sst"): DropRemoteObsolete,
				rkey(3, "a", "9.sst"): DropRemoteUnreferenced,
			},
			liveKept: 2,
		},
		{
			name: "remote keys without an epoch locator are not ours; an unreadable kept record stops every remote deletion",
			inv: inventory{checkpoints: []*listedCheckpoint{cp(1, done, old), cp(2, "unreadable", old)},
				remote: []blobstore.ObjectInfo{robj("remote/op/g-1/1.sst", old), robj("remote/x", old), robj(rkey(1, "a", "1.sst"), old)},
				latest: id(1), latestCompleted: id(1), writerEpoch: 4},
			want: map[string]Reason{id(1): KeepLatestCompleted, id(2): KeepUnreadable},
		},
		{
			name: "remote keys without an epoch locator are left alone",
			inv: inventory{checkpoints: []*listedCheckpoint{cp(1, done, old)},
				remote: []blobstore.ObjectInfo{robj("remote/op/g-1/1.sst", old), robj("remote/x", old), robj("remote/op/e0-a/1.sst", old), robj("remote/op/e1/1.sst", old), robj(rkey(1, "a", "1.sst"), old)},
				latest: id(1), latestCompleted: id(1), writerEpoch: 4},
			want:    map[string]Reason{id(1): KeepLatestCompleted},
			deleted: map[string]Reason{rkey(1, "a", "1.sst"): DropRemoteUnreferenced},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := planGC(tc.inv, now, opts)
			if p.liveWriterKept != tc.liveKept {
				t.Errorf("%d remote objects kept for the live writer, want %d", p.liveWriterKept, tc.liveKept)
			}
			got := map[string]Reason{}
			for _, v := range p.verdicts {
				got[v.ID] = v.Reason
				if v.Keep != slices.Contains([]Reason{KeepPinned, KeepLatestCompleted, KeepLatest, KeepNewest, KeepUnreadable, KeepInProgress, KeepLiveWriter}, v.Reason) {
					t.Errorf("%s: keep=%v with reason %q", v.ID, v.Keep, v.Reason)
				}
			}
			for id, want := range tc.want {
				if got[id] != want {
					t.Errorf("%s: %q, want %q", id, got[id], want)
				}
			}
			gotDel := map[string]Reason{}
			for i, d := range p.deletions {
				gotDel[d.Key] = d.Reason
				// A record goes before the files of its checkpoint.
				if d.Key == recordKey(d.Checkpoint) {
					for _, e := range p.deletions[:i] {
						if e.Checkpoint == d.Checkpoint && e.Reason != DropExpiredPin {
							t.Errorf("%s deleted before its record", e.Key)
						}
					}
				}
			}
			if len(gotDel) != len(tc.deleted) {
				t.Errorf("deletions %v, want %v", gotDel, tc.deleted)
			}
			for k, want := range tc.deleted {
				if gotDel[k] != want {
					t.Errorf("delete %s: %q, want %q", k, gotDel[k], want)
				}
			}
		})
	}
}
