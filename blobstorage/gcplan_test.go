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
	shared := func(n uint64, at time.Time) blobstore.ObjectInfo {
		return blobstore.ObjectInfo{Key: sharedKey(id(n), 1, "op", "1.sst"), Size: 5, ModTime: at}
	}
	pin := func(n uint64, at time.Time) blobstore.ObjectInfo {
		return blobstore.ObjectInfo{Key: pinKey(id(n), "nonce"), ModTime: at}
	}
	done := string(checkpoint.StatusCompleted)
	prep := string(checkpoint.StatusPrepared)

	for _, tc := range []struct {
		name    string
		inv     inventory
		want    map[string]Reason // id → reason
		deleted map[string]Reason // key → reason (exactly these)
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
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := planGC(tc.inv, now, opts)
			got := map[string]Reason{}
			for _, v := range p.verdicts {
				got[v.ID] = v.Reason
				if v.Keep != slices.Contains([]Reason{KeepPinned, KeepLatestCompleted, KeepLatest, KeepNewest, KeepUnreadable, KeepInProgress}, v.Reason) {
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
