package main

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
)

// inspectOutput is inspect's JSON.
type inspectOutput struct {
	Snapshot snapshot    `json:"snapshot"`
	Owners   []ownerInfo `json:"owners"`
	Keys     []shownKV   `json:"keys"`
	More     bool        `json:"more"`
}

// recordsShown is how inspect shows the demo's record total: an 8-byte
// big-endian count, not printable, so in hex.
func recordsShown(n uint64) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], n)
	return fmt.Sprintf("0x%x", b[:])
}

// inspect opens a checkpoint offline and shows each owner's tables and
// keys; --owner and --prefix narrow the listing, --limit cuts it.
func TestInspectShowsOwnersAndKeys(t *testing.T) {
	store := ranDemo(t)
	var out inspectOutput
	mustJSON(t, store, &out, "inspect", "latest-completed", "--owner", "totals")
	if out.Snapshot.Kind != "checkpoint" || out.Snapshot.Remote || len(out.Owners) != 1 || out.Owners[0].Tables == 0 {
		t.Fatalf("inspect: %+v", out)
	}
	if len(out.Keys) != 1 || out.Keys[0].Key != `"records"` || out.Keys[0].Value != recordsShown(20000) {
		t.Fatalf("inspect of totals: keys %+v, want records = 20000", out.Keys)
	}
	mustJSON(t, store, &out, "inspect", "latest-completed", "--owner", "counts", "--limit", "3")
	if len(out.Keys) != 3 || !out.More || out.Owners[0].Keys < 300 {
		t.Fatalf("inspect of counts --limit 3: %+v, want 3 keys, more, about 300 keys or more", out)
	}
	first := strings.Trim(out.Keys[0].Key, `"`)
	mustJSON(t, store, &out, "inspect", "latest-completed", "--owner", "counts", "--prefix", first)
	for _, kv := range out.Keys {
		if !strings.HasPrefix(kv.Key, `"`+first) {
			t.Errorf("--prefix %s listed %s", first, kv.Key)
		}
	}
	text := must(t, store, "inspect", "latest-completed")
	if !strings.Contains(text, "counts") || !strings.Contains(text, "totals") || !strings.Contains(text, "local (downloaded)") {
		t.Fatalf("inspect text:\n%s", text)
	}
	if _, errOut, code := tm(t, store, "inspect", "latest", "--owner", "nobody"); code != exitUsage || !strings.Contains(errOut, "counts, totals") {
		t.Errorf("inspect --owner nobody: exit %d, want %d naming the owners:\n%s", code, exitUsage, errOut)
	}
	if _, _, code := tm(t, store, "inspect", "no-such-savepoint"); code != exitError {
		t.Errorf("inspect of nothing: exit %d, want %d", code, exitError)
	}
}

// A savepoint is inspected through its archive, and a checkpoint in
// remote state is read in place, both showing the same state.
func TestInspectSavepointAndRemoteState(t *testing.T) {
	store := fileURL(t.TempDir())
	must(t, "", demoArgs(t.TempDir(), store, "--remote-state")...)
	must(t, store, "savepoint", "create", "sp")
	for _, name := range []string{"latest-completed", "sp"} {
		var out inspectOutput
		mustJSON(t, store, &out, "inspect", name, "--owner", "totals")
		if !out.Snapshot.Remote || len(out.Keys) != 1 || out.Keys[0].Value != recordsShown(20000) {
			t.Errorf("inspect %s: %+v, want remote state with records = 20000", name, out)
		}
		// The savepoint too is read in place, from its archive by range.
		if text := must(t, store, "inspect", name); !strings.Contains(text, "remote (tables read in place)") {
			t.Errorf("inspect %s:\n%s", name, text)
		}
	}
}

// diff counts and lists what changed between two checkpoints, per owner.
func TestDiffSaysWhatChanged(t *testing.T) {
	store := fileURL(t.TempDir())
	must(t, "", demoArgs(t.TempDir(), store)...)
	var ls struct {
		Checkpoints []checkpointInfo `json:"checkpoints"`
	}
	mustJSON(t, store, &ls, "ls")
	if len(ls.Checkpoints) < 2 {
		t.Fatalf("ls: %+v, want two checkpoints or more", ls)
	}
	a, b := ls.Checkpoints[0].ID, ls.Checkpoints[len(ls.Checkpoints)-1].ID
	var out struct {
		Owners  []ownerDiff `json:"owners"`
		Changes []keyChange `json:"changes"`
	}
	mustJSON(t, store, &out, "diff", a, b, "--limit", "5")
	byOwner := map[string]ownerDiff{}
	for _, d := range out.Owners {
		byOwner[d.Owner] = d
	}
	if d := byOwner["totals"]; d.Changed != 1 || d.Added != 0 || d.Removed != 0 {
		t.Errorf("diff %s %s: totals %+v, want one key changed", a, b, d)
	}
	if d := byOwner["counts"]; d.Changed == 0 || d.Removed != 0 {
		t.Errorf("diff %s %s: counts %+v, want changed counts and none removed", a, b, d)
	}
	if len(out.Changes) != 5 {
		t.Errorf("diff --limit 5 listed %d changes", len(out.Changes))
	}
	mustJSON(t, store, &out, "diff", b, b)
	for _, d := range out.Owners {
		if d.Added+d.Removed+d.Changed != 0 {
			t.Errorf("diff of %s with itself: %+v", b, d)
		}
	}
}
