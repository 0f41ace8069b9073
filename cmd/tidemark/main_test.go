package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/demo"
)

// tm runs the tidemark command in-process with args and returns its
// stdout, stderr and exit code. $TIDEMARK_STORE is storeEnvValue.
func tm(t *testing.T, storeEnvValue string, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, env{
		stdout: &out,
		stderr: &errb,
		getenv: func(k string) string {
			if k == storeEnv {
				return storeEnvValue
			}
			return ""
		},
	})
	return out.String(), errb.String(), code
}

// must runs tm and fails the test unless it exits 0.
func must(t *testing.T, store string, args ...string) string {
	t.Helper()
	out, errOut, code := tm(t, store, args...)
	if code != 0 {
		t.Fatalf("tidemark %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

func mustJSON(t *testing.T, store string, v any, args ...string) {
	t.Helper()
	out := must(t, store, append(args, "--output", "json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("tidemark %s --output json: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func fileURL(dir string) string {
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(dir)}).String()
}

// demoArgs runs a small, fast demo in dir against store.
func demoArgs(dir, store string, extra ...string) []string {
	return append([]string{"demo", "--dir", dir, "--store", store, "--records", "20000", "--words", "300",
		"--batch", "500", "--checkpoint-every", "4000", "--interval", "1h", "--slow", "0"}, extra...)
}

// ranDemo returns the URL of a temp file store holding a completed demo run.
func ranDemo(t *testing.T) string {
	t.Helper()
	store := fileURL(t.TempDir())
	out := must(t, "", demoArgs(t.TempDir(), store)...)
	if !strings.Contains(out, "exactly-once: OK, 20000 records, 300 words") {
		t.Fatalf("demo stdout %q, want the exactly-once OK line", out)
	}
	return store
}

func TestDemoChecksExactlyOnceAndSaysSo(t *testing.T) {
	store := fileURL(t.TempDir())
	var res map[string]any
	mustJSON(t, "", &res, demoArgs(t.TempDir(), store)...)
	if res["exactly_once"] != true || res["records"] != float64(20000) || res["checkpoints"] != float64(5) {
		t.Fatalf("demo JSON %v: want exactly_once, 20000 records, 5 checkpoints", res)
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
	ctx := context.Background()
	bs := openURL(t, store)
	// A committed transaction the job never produced: counts doubled.
	body := "committed " + checkpoint.NewID(999) + "\ntari\t5\n"
	if err := bs.Put(ctx, "sink/out/"+checkpoint.NewID(999), strings.NewReader(body)); err != nil {
		t.Fatal(err)
	}
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
	if ok, err := openURL(t, west).Exists(context.Background(), demo.BaseKey); err != nil || !ok {
		t.Fatalf("%s not in west (%v)", demo.BaseKey, err)
	}
}

func TestDemoResumedFromASavepointExitsThreeOnWrongOutput(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name   string
		damage func(t *testing.T, bs blobstore.Blobstore)
	}{
		{"a count doubled", func(t *testing.T, bs blobstore.Blobstore) {
			body := "committed " + checkpoint.NewID(999) + "\ntari\t5\n"
			if err := bs.Put(ctx, demo.OutPrefix+checkpoint.NewID(999), strings.NewReader(body)); err != nil {
				t.Fatal(err)
			}
		}},
		{"a transaction missing", func(t *testing.T, bs blobstore.Blobstore) {
			for o, err := range bs.List(ctx, demo.OutPrefix) {
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

func openURL(t *testing.T, u string) blobstore.Blobstore {
	t.Helper()
	bs, err := blobstore.Open(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	return bs
}

func TestLsListsCheckpointsWithPointersAndSavepoints(t *testing.T) {
	store := ranDemo(t)
	must(t, store, "savepoint", "create", "v1")
	var ls struct {
		Checkpoints []checkpointInfo `json:"checkpoints"`
		Savepoints  []savepointInfo  `json:"savepoints"`
	}
	mustJSON(t, store, &ls, "ls")
	if len(ls.Checkpoints) == 0 || len(ls.Savepoints) != 1 || ls.Savepoints[0].Label != "v1" {
		t.Fatalf("ls: %+v, want checkpoints and savepoint v1", ls)
	}
	last := ls.Checkpoints[len(ls.Checkpoints)-1]
	if last.Latest != "latest,latest-completed" || last.Status != checkpoint.StatusCompleted || last.Size == 0 || last.Files == 0 {
		t.Fatalf("newest checkpoint %+v: want completed, both pointers, files", last)
	}
	text := must(t, store, "ls")
	for _, want := range []string{"CHECKPOINT", last.ID, "latest-completed", "SAVEPOINT", "v1"} {
		if !strings.Contains(text, want) {
			t.Errorf("ls text output lacks %q:\n%s", want, text)
		}
	}
}

func TestShowPrintsOffsetsAndFiles(t *testing.T) {
	store := ranDemo(t)
	var show struct {
		Checkpoint checkpointInfo                   `json:"checkpoint"`
		Offsets    map[string]any                   `json:"offsets"`
		Files      map[string][]blobstorage.FileRef `json:"files"`
	}
	mustJSON(t, store, &show, "show", "latest-completed")
	if show.Offsets["next"] != float64(20000) || len(show.Files["counts"]) == 0 || len(show.Files["totals"]) == 0 {
		t.Fatalf("show: %+v, want offset 20000 and files of both owners", show)
	}
	text := must(t, store, "show", show.Checkpoint.ID)
	if !strings.Contains(text, "completed") || !strings.Contains(text, `"next":20000`) {
		t.Fatalf("show text:\n%s", text)
	}
	if _, _, code := tm(t, store, "show", checkpoint.NewID(12345)); code != exitError {
		t.Fatalf("show of a missing checkpoint: exit %d, want 1", code)
	}
}

func TestVerifyCheckpointDetectsCorruptionWithExitThree(t *testing.T) {
	store := ranDemo(t)
	must(t, store, "verify", "latest-completed")
	var show struct {
		Files map[string][]blobstorage.FileRef `json:"files"`
	}
	mustJSON(t, store, &show, "show", "latest-completed")
	ctx := context.Background()
	bs := openURL(t, store)
	victim := show.Files["counts"][0].Key
	if err := bs.Put(ctx, victim, strings.NewReader("not the state")); err != nil {
		t.Fatal(err)
	}
	out, _, code := tm(t, store, "verify", "latest-completed")
	if code != exitVerify || !strings.Contains(out, "FAILED") || !strings.Contains(out, victim) {
		t.Fatalf("verify of a corrupt checkpoint: exit %d, stdout %q; want 3, FAILED naming %s", code, out, victim)
	}
	if err := bs.Delete(ctx, victim); err != nil {
		t.Fatal(err)
	}
	if _, _, code := tm(t, store, "verify", "latest-completed"); code != exitVerify {
		t.Fatalf("verify with a missing file: exit %d, want 3", code)
	}
}

func TestSavepointCreateCopyVerifyRestoreRemove(t *testing.T) {
	src := ranDemo(t)
	dst := fileURL(t.TempDir())
	var created struct {
		Checkpoint string `json:"checkpoint"`
		Size       int64  `json:"size"`
	}
	mustJSON(t, src, &created, "savepoint", "create", "v1")
	if created.Checkpoint == "" || created.Size == 0 {
		t.Fatalf("savepoint create: %+v", created)
	}
	must(t, "", "savepoint", "cp", "v1", src, dst)
	var v verifyResult
	mustJSON(t, dst, &v, "verify", "v1")
	if !v.OK || v.Kind != "savepoint" || v.Source != created.Checkpoint || v.Files == 0 {
		t.Fatalf("verify of the copy: %+v", v)
	}
	// Restore in the other store: it becomes its latest completed checkpoint.
	must(t, dst, "savepoint", "restore", "v1")
	var show struct {
		Checkpoint checkpointInfo `json:"checkpoint"`
	}
	mustJSON(t, dst, &show, "show", "latest-completed")
	if show.Checkpoint.ID != created.Checkpoint {
		t.Fatalf("latest completed of the restored store is %s, want %s", show.Checkpoint.ID, created.Checkpoint)
	}
	must(t, dst, "verify", "latest-completed")

	var sps []savepointInfo
	mustJSON(t, src, &sps, "savepoint", "ls")
	if len(sps) != 1 || sps[0].Label != "v1" || sps[0].Size != created.Size {
		t.Fatalf("savepoint ls: %+v", sps)
	}
	must(t, src, "savepoint", "rm", "v1")
	if _, _, code := tm(t, src, "savepoint", "rm", "v1"); code != exitError {
		t.Fatalf("second rm: exit %d, want 1", code)
	}
	mustJSON(t, src, &sps, "savepoint", "ls")
	if len(sps) != 0 {
		t.Fatalf("savepoint ls after rm: %+v", sps)
	}
}

func TestSavepointCopyRefusesACorruptSavepoint(t *testing.T) {
	src := ranDemo(t)
	dst := fileURL(t.TempDir())
	must(t, src, "savepoint", "create", "v1")
	ctx := context.Background()
	bs := openURL(t, src)
	rc, err := bs.Get(ctx, checkpoint.SavepointKey("v1"))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	_, err = buf.ReadFrom(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	b[len(b)/2] ^= 0xff // a flipped byte in the middle of the archive
	if err := bs.Put(ctx, checkpoint.SavepointKey("v1"), bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := tm(t, "", "savepoint", "cp", "v1", src, dst); code != exitVerify {
		t.Fatalf("cp of a corrupt savepoint: exit %d, want 3\n%s", code, errOut)
	}
	if _, _, code := tm(t, src, "verify", "v1"); code != exitVerify {
		t.Fatalf("verify of a corrupt savepoint: exit %d, want 3", code)
	}
	var sps []savepointInfo
	mustJSON(t, dst, &sps, "savepoint", "ls")
	if len(sps) != 0 {
		t.Fatalf("a corrupt copy became visible in the destination: %+v", sps)
	}
}

func TestGCDryRunReportsAndGCDeletes(t *testing.T) {
	store := ranDemo(t)
	var before struct {
		Checkpoints []checkpointInfo `json:"checkpoints"`
	}
	mustJSON(t, store, &before, "ls")
	var dry struct {
		DryRun bool                 `json:"dry_run"`
		Report blobstorage.GCReport `json:"report"`
	}
	mustJSON(t, store, &dry, "gc", "--dry-run", "--keep", "1")
	if !dry.DryRun || len(dry.Report.Retained) != 1 || len(dry.Report.Dropped) != len(before.Checkpoints)-1 {
		t.Fatalf("gc --dry-run --keep 1 over %d checkpoints: %+v", len(before.Checkpoints), dry)
	}
	var after struct {
		Checkpoints []checkpointInfo `json:"checkpoints"`
	}
	mustJSON(t, store, &after, "ls")
	if len(after.Checkpoints) != len(before.Checkpoints) {
		t.Fatalf("dry run deleted checkpoints: %d → %d", len(before.Checkpoints), len(after.Checkpoints))
	}
	must(t, store, "gc", "--keep", "1")
	mustJSON(t, store, &after, "ls")
	if len(after.Checkpoints) != 1 {
		t.Fatalf("after gc --keep 1: %d checkpoints, want 1", len(after.Checkpoints))
	}
	must(t, store, "verify", "latest-completed")
}

func TestGCDryRunDoesNotFenceARunningJob(t *testing.T) {
	store := ranDemo(t)
	ctx := context.Background()
	bs := openURL(t, store)
	// The job is running: it holds the writer role.
	job := blobstorage.New(bs, t.TempDir(), blobstorage.Options{Keep: 1})
	epoch, err := job.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	writer, err := bs.Stat(ctx, "_writer")
	if err != nil {
		t.Fatal(err)
	}
	var dry struct {
		Report blobstorage.GCReport `json:"report"`
	}
	mustJSON(t, store, &dry, "gc", "--dry-run", "--keep", "1")
	if len(dry.Report.Dropped) == 0 {
		t.Fatalf("dry run found nothing to drop: %+v (the test proves nothing)", dry.Report)
	}
	if info, err := bs.Stat(ctx, "_writer"); err != nil || info.ETag != writer.ETag {
		t.Fatalf("gc --dry-run rewrote _writer: %+v, %v (was ETag %q)", info, err, writer.ETag)
	}
	// Still the writer: its own GC (a write) is not fenced, and deletes
	// what the dry run reported.
	rep, err := job.GC(ctx, blobstorage.GCOptions{})
	if err != nil || job.Epoch() != epoch {
		t.Fatalf("the job's GC after gc --dry-run: %v (epoch %d, was %d)", err, job.Epoch(), epoch)
	}
	if !slices.Equal(rep.Dropped, dry.Report.Dropped) || rep.Objects != dry.Report.Objects {
		t.Errorf("dry run reported %+v, the job's GC did %+v", dry.Report, rep)
	}
}

func TestGCHelpNoLongerWarnsThatDryRunFences(t *testing.T) {
	out := must(t, "", "gc", "--help")
	if !strings.Contains(out, "--dry-run only reads") || strings.Contains(out, "even with --dry-run") {
		t.Errorf("gc --help does not say that --dry-run is read-only:\n%s", out)
	}
}

func TestUsageErrorsExitTwo(t *testing.T) {
	store := fileURL(t.TempDir())
	cases := []struct {
		name  string
		store string
		args  []string
	}{
		{"unknown command", store, []string{"frobnicate"}},
		{"unknown subcommand", store, []string{"savepoint", "frobnicate"}},
		{"unknown flag", store, []string{"ls", "--frobnicate"}},
		{"missing argument", store, []string{"show"}},
		{"extra argument", store, []string{"savepoint", "rm", "a", "b"}},
		{"bad output format", store, []string{"ls", "--output", "yaml"}},
		{"no store", "", []string{"ls"}},
		{"label escaping the store", store, []string{"savepoint", "create", "../x"}},
		{"invalid checkpoint id", store, []string{"show", "a/b"}},
		{"bad keep", store, []string{"gc", "--keep", "0"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, errOut, code := tm(t, c.store, c.args...)
			if code != exitUsage || errOut == "" {
				t.Fatalf("tidemark %v: exit %d, stderr %q; want 2 and a message", c.args, code, errOut)
			}
		})
	}
}

func TestErrorsAreJSONWithOutputJSON(t *testing.T) {
	_, errOut, code := tm(t, fileURL(t.TempDir()), "show", checkpoint.NewID(1), "--output", "json")
	var e struct {
		Error    string `json:"error"`
		ExitCode int    `json:"exit_code"`
	}
	if err := json.Unmarshal([]byte(errOut), &e); err != nil || code != exitError || e.ExitCode != exitError || e.Error == "" {
		t.Fatalf("exit %d, stderr %q (%v): want a JSON error with exit_code 1", code, errOut, err)
	}
}

func TestHelpShowsExamples(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"demo", "--help"}, {"savepoint", "cp", "--help"}, {"gc", "--help"}} {
		out := must(t, "", args...)
		if !strings.Contains(out, "Examples:") {
			t.Errorf("tidemark %v has no examples:\n%s", args, out)
		}
	}
}

func TestProgressIsQuietWhenNotATerminal(t *testing.T) {
	src := ranDemo(t)
	must(t, src, "savepoint", "create", "v1")
	_, errOut, code := tm(t, "", "savepoint", "cp", "v1", src, fileURL(t.TempDir()))
	if code != 0 || errOut != "" {
		t.Fatalf("cp off a terminal: exit %d, stderr %q; want nothing on stderr", code, errOut)
	}
}

func TestProgressIsDrawnOnATerminalUnlessTheOutputIsJSON(t *testing.T) {
	src := ranDemo(t)
	must(t, src, "savepoint", "create", "v1")
	cases := []struct {
		name    string
		extra   []string
		wantBar bool
	}{
		{"text output", nil, true},
		{"json output", []string{"--output", "json"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			args := append([]string{"savepoint", "cp", "v1", src, fileURL(t.TempDir())}, c.extra...)
			code := run(context.Background(), args, env{
				stdout:   &out,
				stderr:   &errb,
				getenv:   func(string) string { return "" },
				terminal: true,
			})
			bar := strings.Contains(errb.String(), "copy v1 [")
			if code != 0 || bar != c.wantBar {
				t.Fatalf("cp on a terminal with %v: exit %d, progress bar %v, want %v\nstderr: %q", c.extra, code, bar, c.wantBar, errb.String())
			}
		})
	}
}
