package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/checkpoint"
)

// gcBesideDemo runs `gc --confirm` again and again while a demo runs on
// store, with a grace period far shorter than a save (only the protocol,
// not the clock, can keep the job's unfinished work), and checks that the
// demo ends exactly-once, never fenced, with the retained set as
// configured: the newest --keep completed checkpoints. Every fifth run a
// savepoint is created and removed (savepoint rm takes no role either).
func gcBesideDemo(t *testing.T, store string) {
	const keep = 2
	type result struct {
		out, errOut string
		code        int
	}
	done := make(chan result, 1)
	go func() {
		out, errOut, code := tm(t, "", demoArgs(t.TempDir(), store, "--keep", "2", "--batch", "200",
			"--checkpoint-every", "2000", "--slow", "20ms")...)
		done <- result{out, errOut, code}
	}()
	runs, deleting, removed := 0, 0, 0
	var demo result
	for running := true; running; {
		select {
		case demo = <-done:
			running = false
		case <-time.After(20 * time.Millisecond): // a gc every ~20 ms, not a busy loop
		}
		out, errOut, code := tm(t, store, "gc", "--confirm", "--keep", "2", "--grace", "1ms", "--output", "json")
		if code != 0 {
			if strings.Contains(out+errOut, "no Tidemark store") && runs == 0 {
				continue // the demo has not written its first object yet
			}
			t.Fatalf("gc --confirm beside the demo (run %d): exit %d\n%s%s", runs+1, code, out, errOut)
		}
		var res struct {
			Report blobstorage.GCReport `json:"report"`
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("gc --output json: %v\n%s", err, out)
		}
		runs++
		if res.Report.Objects > 0 {
			deleting++
		}
		if running && runs%5 == 0 {
			// savepoint rm beside the job follows the same rules: no
			// writer role, nothing the job needs.
			label := fmt.Sprintf("live-%d", runs)
			if _, _, code := tm(t, store, "savepoint", "create", label); code == 0 {
				if out, errOut, code := tm(t, store, "savepoint", "rm", label); code != 0 {
					t.Fatalf("savepoint rm %s beside the demo: exit %d\n%s%s", label, code, out, errOut)
				}
				removed++
			}
		}
	}
	if demo.code != 0 || !strings.Contains(demo.out, "exactly-once: OK") || strings.Contains(demo.errOut, "fenced") {
		t.Fatalf("demo beside gc --confirm: exit %d\nstdout: %s\nstderr: %s", demo.code, demo.out, demo.errOut)
	}
	if runs < 3 || deleting == 0 || removed == 0 {
		t.Fatalf("%d gc runs beside the demo, %d of them deleting, %d savepoints removed: the test proves nothing", runs, deleting, removed)
	}
	t.Logf("%d gc --confirm runs beside the demo, %d of them deleted something; %d savepoints created and removed", runs, deleting, removed)
	// _writer is the demo's own epoch: nothing took the role.
	bs := openURL(t, store)
	var w struct {
		Epoch uint64 `json:"epoch"`
	}
	rc, err := bs.Get(t.Context(), "_writer")
	if err != nil {
		t.Fatal(err)
	}
	err = json.NewDecoder(rc).Decode(&w)
	rc.Close()
	if err != nil || w.Epoch != 1 {
		t.Fatalf("_writer epoch %d (%v), want the demo's 1: something took the writer role", w.Epoch, err)
	}
	// Retention as configured: the newest --keep completed checkpoints,
	// each restorable.
	must(t, store, "gc", "--confirm", "--keep", "2", "--grace", "1ms")
	var ls struct {
		Checkpoints []checkpointInfo `json:"checkpoints"`
	}
	mustJSON(t, store, &ls, "ls")
	latest, err := blobstorage.New(bs, "", blobstorage.Options{}).PointerID(t.Context(), blobstorage.PointerLatestCompleted)
	if err != nil {
		t.Fatal(err)
	}
	seq, err := checkpoint.ParseID(latest)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{checkpoint.NewID(seq - 1), latest}
	var got []string
	for _, c := range ls.Checkpoints {
		got = append(got, c.ID)
	}
	if len(want) != keep || !slices.Equal(got, want) {
		t.Fatalf("checkpoints after the run: %v, want the newest %d completed ones %v", got, keep, want)
	}
	for _, id := range want {
		must(t, store, "verify", id)
	}
}

func TestGCConfirmBesideARunningDemoNeverFencesItOnAFileStore(t *testing.T) {
	gcBesideDemo(t, fileURL(t.TempDir()))
}

func TestGCConfirmBesideARunningDemoNeverFencesItOnMinIO(t *testing.T) {
	gcBesideDemo(t, s3URL(t, "live-gc"))
}

// writeFiles writes each file (slash path → content) under dir, aged.
func writeFiles(t *testing.T, dir string, files map[string]string, age time.Duration) {
	t.Helper()
	old := time.Now().Add(-age)
	for rel, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
}

// The case: a user's directory whose folders are named like the
// layout's (checkpoints/old/notes.txt, shared/team/report.pdf, three days
// old) was adopted: gc deleted both files and wrote _tidemark, _writer and
// the pointers. Every command that deletes refuses it and writes nothing.
func TestGCAndSavepointRmRefuseAUserFolderThatLooksLikeAStore(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"checkpoints/old/notes.txt": "notes",
		"shared/team/report.pdf":    "report",
		"savepoints/keep-me":        "a user's file",
	}, 72*time.Hour)
	before := treeOf(t, dir)
	for _, args := range [][]string{
		{"gc"}, {"gc", "--confirm", "--grace", "1s"}, {"gc", "--confirm", "--fence", "--grace", "1s"},
		{"savepoint", "rm", "keep-me"},
	} {
		out, errOut, code := tm(t, fileURL(dir), args...)
		if code != exitError || !strings.Contains(errOut, "not a Tidemark store") {
			t.Errorf("%v: exit %d, want %d and a refusal\nstdout: %s\nstderr: %s", args, code, exitError, out, errOut)
		}
	}
	// The commands that take the writer role refuse it too, before they
	// write a mark, a pointer or _writer.
	src := ranDemo(t)
	must(t, src, "savepoint", "create", "v1")
	for _, args := range [][]string{
		demoArgs(t.TempDir(), fileURL(dir)),
		{"savepoint", "restore", "v1", "--from", src},
	} {
		out, errOut, code := tm(t, fileURL(dir), args...)
		if code == 0 || !strings.Contains(errOut, "not a Tidemark store") {
			t.Errorf("%v: exit %d, want a refusal\nstdout: %s\nstderr: %s", args, code, out, errOut)
		}
	}
	if after := treeOf(t, dir); !maps.Equal(after, before) {
		t.Fatalf("a refused command changed the directory:\nbefore %v\nafter  %v", before, after)
	}
}

// A user's look-alike files next to a job's real data: in a store written
// before marks existed gc refuses the whole store and writes nothing; in a
// marked store gc --confirm leaves them alone and collects the rest.
func TestGCLeavesALookAlikeNextToRealDataAlone(t *testing.T) {
	lookAlikes := map[string]string{
		"checkpoints/old/notes.txt":                          "notes",
		"checkpoints/" + checkpoint.NewID(1) + "/notes.txt":  "notes",
		"shared/team/report.pdf":                             "report",
		"shared/counts/" + checkpoint.NewID(1) + "-e1/a.pdf": "report",
		"remote/counts/e1-00ff/notes.txt":                    "notes",
		"pins/readme.txt":                                    "readme",
		"savepoints/team/v1.tar":                             "archive",
		// One of every other key class of the layout.
		"_tidemark.txt":         "notes",
		"_writer.bak":           "notes",
		"_latest-completed.old": "notes",
		"checkpoints/" + checkpoint.NewID(1) + "/checkpoint.json.bak":      "notes",
		"checkpoints/" + checkpoint.NewID(1) + "/private/draft/w/MANIFEST": "notes",
		"checkpoints/" + checkpoint.NewID(1) + "/parts/e1/w/w-1/notes.txt": "notes",
		"_tidemark_probe/notes.txt":                                        "notes",
	}
	t.Run("unmarked", func(t *testing.T) {
		storeDir := t.TempDir()
		store := fileURL(storeDir)
		must(t, "", demoArgs(t.TempDir(), store)...)
		// A store from before marks, of the layout only (the demo's sink
		// output, not part of it, goes too).
		for _, p := range []string{"_tidemark", "sink"} {
			if err := os.RemoveAll(filepath.Join(storeDir, p)); err != nil {
				t.Fatal(err)
			}
		}
		for k, v := range lookAlikes {
			writeFiles(t, storeDir, map[string]string{k: v}, 72*time.Hour)
			before := treeOf(t, storeDir)
			for _, args := range [][]string{{"gc", "--keep", "1"}, {"gc", "--confirm", "--keep", "1", "--grace", "1s"}} {
				if _, errOut, code := tm(t, store, args...); code != exitError || !strings.Contains(errOut, "not a Tidemark store") {
					t.Errorf("%s beside real data, %v: exit %d, want a refusal\n%s", k, args, code, errOut)
				}
			}
			if after := treeOf(t, storeDir); !maps.Equal(after, before) {
				t.Fatalf("%s: a refused gc changed the store", k)
			}
			if err := os.Remove(filepath.Join(storeDir, filepath.FromSlash(k))); err != nil {
				t.Fatal(err)
			}
		}
		// Without them, the unmarked store is the job's.
		must(t, store, "gc", "--keep", "1")
	})
	t.Run("marked", func(t *testing.T) {
		storeDir := t.TempDir()
		store := fileURL(storeDir)
		must(t, "", demoArgs(t.TempDir(), store)...)
		writeFiles(t, storeDir, lookAlikes, 72*time.Hour)
		var res struct {
			Report blobstorage.GCReport `json:"report"`
		}
		mustJSON(t, store, &res, "gc", "--confirm", "--keep", "1", "--grace", "1s")
		if res.Report.Objects == 0 {
			t.Fatalf("gc deleted nothing: the test proves nothing")
		}
		for k, v := range lookAlikes {
			if b, err := os.ReadFile(filepath.Join(storeDir, filepath.FromSlash(k))); err != nil || string(b) != v {
				t.Errorf("gc --confirm touched the user's %s (%v)", k, err)
			}
		}
		must(t, store, "verify", "latest-completed")
	})
}

// --fence is the explicit way to take the writer role (a stopped job's
// remote objects); it says it fences, and needs --confirm.
func TestGCFenceSaysItTakesTheWriterRole(t *testing.T) {
	store := ranDemo(t)
	if _, _, code := tm(t, store, "gc", "--fence"); code != exitUsage {
		t.Errorf("gc --fence without --confirm: exit %d, want %d", code, exitUsage)
	}
	_, errOut, code := tm(t, store, "gc", "--confirm", "--fence", "--keep", "1")
	if code != 0 || !strings.Contains(errOut, "fenced") {
		t.Fatalf("gc --confirm --fence: exit %d, stderr %q: want success and a warning that it fences", code, errOut)
	}
}
