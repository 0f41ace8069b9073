package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/cmd/tidemark/internal/demo"
)

func TestDemoChecksExactlyOnceAndSaysSo(t *testing.T) {
	store := fileURL(t.TempDir())
	var res map[string]any
	mustJSON(t, "", &res, demoArgs(t.TempDir(), store)...)
	if res["exactly_once"] != true || res["records"] != float64(20000) || res["checkpoints"] != float64(5) {
		t.Fatalf("demo JSON %v: want exactly_once, 20000 records, 5 checkpoints", res)
	}
}

// The hint how to crash and resume is for a job that runs: a finished
// job's rerun only checks, and does not print it.
func TestDemoHintsHowToCrashOnlyWhileThereIsWorkLeft(t *testing.T) {
	dir, store := t.TempDir(), fileURL(t.TempDir())
	const hint = "to crash and resume: press Ctrl-C"
	if _, errOut, code := tm(t, "", demoArgs(dir, store)...); code != 0 || !strings.Contains(errOut, hint) {
		t.Fatalf("first run: exit %d, want the hint:\n%s", code, errOut)
	}
	if _, errOut, code := tm(t, "", demoArgs(dir, store)...); code != 0 || strings.Contains(errOut, hint) {
		t.Fatalf("rerun of the finished job: exit %d, want no hint:\n%s", code, errOut)
	}
}

func TestDemoDefaultsToAFileStoreUnderDir(t *testing.T) {
	dir := t.TempDir()
	_, errOut, code := tm(t, "", "demo", "--dir", dir, "--records", "3000", "--slow", "0")
	if code != 0 {
		t.Fatalf("demo: exit %d: %s", code, errOut)
	}
	want := fileURL(filepath.Join(dir, "store"))
	if !strings.Contains(errOut, want) || !strings.Contains(errOut, "run the same command again") {
		t.Fatalf("stderr does not name the store %s or tell how to resume:\n%s", want, errOut)
	}
	must(t, want, "verify", "latest-completed")
}

func TestDemoCrashesWith137AndTheSameCommandResumesOnAnEmptyNode(t *testing.T) {
	store := fileURL(t.TempDir())
	args := demoArgs(t.TempDir(), store, "--crash-after-records", "10000")
	if _, errOut, code := tm(t, "", args...); code != exitCrashed {
		t.Fatalf("crashing demo: exit %d, want %d\n%s", code, exitCrashed, errOut)
	}
	// Another node: a new, empty --dir; same store, same flags.
	args = demoArgs(t.TempDir(), store, "--crash-after-records", "10000")
	out, errOut, code := tm(t, "", args...)
	if code != 0 || !strings.Contains(out, "exactly-once: OK") || !strings.Contains(errOut, "resumed from checkpoint") {
		t.Fatalf("resumed demo: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
}

func TestDemoExitsThreeWhenTheOutputIsNotExactlyOnce(t *testing.T) {
	store := ranDemo(t)
	bs := openURL(t, store)
	// A committed transaction the job never produced: counts doubled.
	duplicateCommit(t, bs)
	out, _, code := tm(t, "", demoArgs(t.TempDir(), store)...)
	if code != exitVerify || !strings.Contains(out, "exactly-once: FAILED") {
		t.Fatalf("demo over a doubled output: exit %d, stdout %q; want 3 and FAILED", code, out)
	}
}

// demoInAnotherStore plays the cross-region story with the CLI: the demo
// runs on store east and crashes mid-way, savepoint L is created there,
// copied to store west and restored there; then the demo resumes on west.
// It returns west and the offset of the savepoint.
func demoInAnotherStore(t *testing.T) (string, float64) {
	t.Helper()
	east, west := fileURL(t.TempDir()), fileURL(t.TempDir())
	if _, errOut, code := tm(t, "", demoArgs(t.TempDir(), east, "--crash-after-records", "10000")...); code != exitCrashed {
		t.Fatalf("demo on east: exit %d, want %d\n%s", code, exitCrashed, errOut)
	}
	must(t, east, "savepoint", "create", "L")
	must(t, "", "savepoint", "cp", "L", east, west)
	must(t, west, "savepoint", "restore", "L")
	var show struct {
		Offsets map[string]any `json:"offsets"`
	}
	mustJSON(t, west, &show, "show", "latest-completed")
	base, _ := show.Offsets["next"].(float64)
	if base <= 0 || base >= 20000 {
		t.Fatalf("savepoint at offset %v: want one mid-way (the test proves nothing)", show.Offsets["next"])
	}
	out := must(t, "", demoArgs(t.TempDir(), west)...)
	want := fmt.Sprintf("exactly-once: OK, 20000 records (output in this store from record %d: resumed from a savepoint), 300 words", int(base))
	if !strings.Contains(out, want) {
		t.Fatalf("demo on west: stdout %q, want %q", out, want)
	}
	return west, base
}

func TestDemoResumedFromASavepointInAnotherStoreIsExactlyOnce(t *testing.T) {
	west, base := demoInAnotherStore(t)
	// Run again on west (it restores west's own last checkpoint): the
	// store remembers where its output starts.
	var res map[string]any
	mustJSON(t, "", &res, demoArgs(t.TempDir(), west)...)
	if res["exactly_once"] != true || res["output_from"] != base || res["output_from_savepoint"] == "" {
		t.Fatalf("demo JSON on west %v: want exactly_once, output_from %v and the savepoint's checkpoint", res, base)
	}
	if ok, err := openURL(t, west).Exists(t.Context(), demo.BaseKey); err != nil || !ok {
		t.Fatalf("%s not in west (%v)", demo.BaseKey, err)
	}
}

func TestDemoResumedFromASavepointExitsThreeOnWrongOutput(t *testing.T) {
	ctx := t.Context()
	cases := []struct {
		name   string
		damage func(t *testing.T, bs blobstore.Blobstore)
	}{
		{"a count doubled", func(t *testing.T, bs blobstore.Blobstore) {
			duplicateCommit(t, bs)
		}},
		{"a transaction missing", func(t *testing.T, bs blobstore.Blobstore) {
			for o, err := range bs.List(ctx, demo.CommitPrefix) {
				if err != nil {
					t.Fatal(err)
				}
				if err := bs.Delete(ctx, o.Key); err != nil {
					t.Fatal(err)
				}
				return
			}
			t.Fatal("no output in west: the test proves nothing")
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			west, base := demoInAnotherStore(t)
			c.damage(t, openURL(t, west))
			out, _, code := tm(t, "", demoArgs(t.TempDir(), west)...)
			want := fmt.Sprintf("records expected in this store's output (output in this store from record %d: resumed from a savepoint)", int(base))
			if code != exitVerify || !strings.Contains(out, "exactly-once: FAILED") || !strings.Contains(out, want) {
				t.Fatalf("demo over damaged output in west: exit %d, stdout %q; want 3, FAILED and %q", code, out, want)
			}
		})
	}
}

// The demo runs on --store or its own directory, never on the store
// $TIDEMARK_STORE names for the operator commands: replaying the quick
// start must not take the writer role of a job running there.
func TestDemoIgnoresTidemarkStore(t *testing.T) {
	other := t.TempDir()
	dir := t.TempDir()
	args := []string{"demo", "--dir", dir, "--records", "4000", "--words", "50", "--batch", "500", "--checkpoint-every", "2000", "--interval", "1h", "--slow", "0"}
	if out, errOut, code := tm(t, fileURL(other), args...); code != 0 || !strings.Contains(out, "exactly-once: OK") {
		t.Fatalf("demo: exit %d\n%s\n%s", code, out, errOut)
	}
	if entries, _ := os.ReadDir(other); len(entries) != 0 {
		t.Fatalf("the demo wrote into $TIDEMARK_STORE: %v", entries)
	}
	if _, err := os.Stat(filepath.Join(dir, "store", "_writer")); err != nil {
		t.Fatalf("the demo did not run on its own store under --dir: %v", err)
	}
}

// A fresh node whose checkpoint lost a state file refuses to resume and
// exits 3, as verify does: the store is damaged (finding 13).
func TestDemoOnAFreshNodeWithALostStateFileExitsThree(t *testing.T) {
	dir := t.TempDir()
	store := fileURL(filepath.Join(dir, "store"))
	if _, _, code := tm(t, "", demoArgs(dir, store, "--crash-after-records", "14000")...); code != exitCrashed {
		t.Fatalf("crashing demo: exit %d, want %d", code, exitCrashed)
	}
	var show struct {
		Files map[string][]struct {
			Key string `json:"key"`
		} `json:"files"`
	}
	mustJSON(t, store, &show, "show", "latest-completed", "--output", "json")
	var lost string
	for _, files := range show.Files {
		for _, f := range files {
			if strings.HasPrefix(f.Key, "shared/") {
				lost = f.Key
			}
		}
	}
	if lost == "" {
		t.Fatal("the checkpoint has no shared file to lose")
	}
	if err := openURL(t, store).Delete(t.Context(), lost); err != nil {
		t.Fatal(err)
	}
	if _, _, code := tm(t, store, "verify", "latest-completed"); code != exitVerify {
		t.Fatalf("verify: exit %d, want %d", code, exitVerify)
	}
	_, errOut, code := tm(t, "", demoArgs(t.TempDir(), store)...)
	if code != exitVerify || !strings.Contains(errOut, lost) {
		t.Fatalf("demo on a fresh node: exit %d, want %d naming %s\n%s", code, exitVerify, lost, errOut)
	}
}

// duplicateCommit commits the demo's last committed transaction in bs
// again, under a new id: the records it names are output twice, the
// damage of a sink without transactions on replay.
func duplicateCommit(t *testing.T, bs blobstore.Blobstore) {
	t.Helper()
	ctx := t.Context()
	last := ""
	for o, err := range bs.List(ctx, demo.CommitPrefix) {
		if err != nil {
			t.Fatal(err)
		}
		last = o.Key
	}
	if last == "" {
		t.Fatal("no committed output: the test proves nothing")
	}
	header := string(blobstoretest.Get(t, bs, last))
	id := strings.TrimPrefix(last, demo.CommitPrefix)
	dup := checkpoint.NewID(999)
	if err := bs.Put(ctx, demo.CommitPrefix+dup, strings.NewReader(strings.Replace(header, " "+id+" ", " "+dup+" ", 1))); err != nil {
		t.Fatal(err)
	}
}

// The CLI block's rollback (docs/cli.md), as a new user plays it: the demo crashes, a
// savepoint is created, the demo completes, the savepoint is restored on
// the same store (a new lineage), and every later demo run checks OK.
func TestDemoRolledBackToASavepointOnTheSameStoreIsExactlyOnce(t *testing.T) {
	dir := t.TempDir()
	store := fileURL(filepath.Join(dir, "store"))
	if _, errOut, code := tm(t, "", demoArgs(dir, store, "--crash-after-records", "10000")...); code != exitCrashed {
		t.Fatalf("crashing demo: exit %d, want %d\n%s", code, exitCrashed, errOut)
	}
	must(t, store, "savepoint", "create", "mid")
	must(t, "", demoArgs(dir, store)...)
	if out := must(t, store, "savepoint", "restore", "mid"); !strings.Contains(out, "a new lineage") {
		t.Fatalf("savepoint restore: %q, want a new lineage", out)
	}
	out, errOut, code := tm(t, "", demoArgs(dir, store)...)
	if code != 0 || !strings.Contains(out, "exactly-once: OK, 20000 records, 300 words") ||
		!strings.Contains(out, "abandoned by a rollback to a savepoint, not counted") || !strings.Contains(errOut, "resumed from checkpoint") {
		t.Fatalf("demo after the rollback: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	var res map[string]any
	mustJSON(t, "", &res, demoArgs(dir, store)...)
	if n, _ := res["abandoned_lineage_transactions"].(float64); res["exactly_once"] != true || n == 0 || res["action"] != "restore" {
		t.Fatalf("demo JSON after the rollback %v: want exactly_once and the abandoned transactions counted", res)
	}
}
