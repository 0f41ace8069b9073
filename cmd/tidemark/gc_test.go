package main

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstorage"
)

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
	must(t, store, "gc", "--confirm", "--keep", "1")
	mustJSON(t, store, &after, "ls")
	if len(after.Checkpoints) != 1 {
		t.Fatalf("after gc --keep 1: %d checkpoints, want 1", len(after.Checkpoints))
	}
	must(t, store, "verify", "latest-completed")
}

func TestGCDryRunDoesNotFenceARunningJob(t *testing.T) {
	store := ranDemo(t)
	ctx := t.Context()
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
	if !strings.Contains(out, "Without --confirm, gc only reads") || strings.Contains(out, "even with --dry-run") {
		t.Errorf("gc --help does not say that --dry-run is read-only:\n%s", out)
	}
}

// The dry run lists every key it would delete with its reason, in text and
// in JSON (snake_case), and the real run deletes exactly those keys.
func TestGCDryRunListsEveryKeyWithItsReason(t *testing.T) {
	dir := t.TempDir()
	must(t, "", demoArgs(dir, "")...)
	store := fileURL(filepath.Join(dir, "store"))
	text := must(t, store, "gc", "--dry-run", "--keep", "1")
	var dry struct {
		Report struct {
			Deletions []struct {
				Key    string `json:"key"`
				Size   int64  `json:"size"`
				Reason string `json:"reason"`
			} `json:"deletions"`
			Verdicts []struct {
				ID     string `json:"id"`
				Keep   bool   `json:"keep"`
				Reason string `json:"reason"`
			} `json:"verdicts"`
		} `json:"report"`
	}
	mustJSON(t, store, &dry, "gc", "--dry-run", "--keep", "1", "--output", "json")
	if len(dry.Report.Deletions) == 0 || len(dry.Report.Verdicts) == 0 {
		t.Fatalf("dry run lists no deletion or verdict: %+v", dry.Report)
	}
	for _, d := range dry.Report.Deletions {
		if d.Key == "" || d.Reason == "" {
			t.Fatalf("deletion without key or reason: %+v", d)
		}
		if !strings.Contains(text, "would delete "+d.Key+" (") {
			t.Fatalf("the text dry run does not list %s:\n%s", d.Key, text)
		}
		// JSON carries the reason's code, the text its description.
		r := blobstorage.Reason(d.Reason)
		if strings.ContainsAny(d.Reason, " :") || r.Describe() == d.Reason || !strings.Contains(text, describeReason(r)) {
			t.Fatalf("deletion reason %q: want a code in JSON, described in the text:\n%s", d.Reason, text)
		}
	}
	bs := openURL(t, store)
	for _, d := range dry.Report.Deletions {
		if ok, err := bs.Exists(t.Context(), d.Key); err != nil || !ok {
			t.Fatalf("the dry run deleted %s (exists %v, %v)", d.Key, ok, err)
		}
	}
	must(t, store, "gc", "--confirm", "--keep", "1")
	for _, d := range dry.Report.Deletions {
		if ok, err := bs.Exists(t.Context(), d.Key); err != nil || ok {
			t.Fatalf("gc left %s that the dry run listed (exists %v, %v)", d.Key, ok, err)
		}
	}
}

// gc on a directory that never held a Tidemark job — or a bucket root —
// deletes nothing and writes nothing, with or without --confirm, however
// old the files that look like Tidemark's are.
func TestGCRefusesAStoreThatIsNotTidemarks(t *testing.T) {
	dir := t.TempDir()
	old := time.Now().Add(-48 * time.Hour)
	for _, rel := range []string{"shared/report.pdf", "checkpoints/2025/notes.txt", "photos/cat.jpg"} {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("user data"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	before := treeOf(t, dir)
	for _, args := range [][]string{{"gc"}, {"gc", "--dry-run"}, {"gc", "--confirm", "--grace", "1s"}} {
		out, errOut, code := tm(t, fileURL(dir), args...)
		if code != exitError || !strings.Contains(errOut, "not a Tidemark store") {
			t.Errorf("%v: exit %d, want %d and a refusal\nstdout: %s\nstderr: %s", args, code, exitError, out, errOut)
		}
	}
	if after := treeOf(t, dir); !maps.Equal(after, before) {
		t.Fatalf("a refused gc changed the directory:\nbefore %v\nafter  %v", before, after)
	}
}

// treeOf maps every file under dir to its content.
func treeOf(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		m[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// gc never creates a store: on a missing directory or a prefix holding
// nothing of Tidemark's (a mistyped path) it fails, dry run and --confirm
// alike, naming the URL and writing nothing.
func TestGCRefusesAStoreThatIsNotThere(t *testing.T) {
	root := t.TempDir()
	empty := filepath.Join(root, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{filepath.Join(root, "missing"), empty} {
		store := fileURL(dir)
		for _, args := range [][]string{{"gc"}, {"gc", "--confirm"}} {
			_, errOut, code := tm(t, store, args...)
			if code != exitError || !strings.Contains(errOut, store) {
				t.Errorf("tidemark %s on %s: exit %d, want %d naming the URL\n%s", strings.Join(args, " "), store, code, exitError, errOut)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(root, "missing")); !os.IsNotExist(err) {
		t.Errorf("gc created the missing store directory (%v)", err)
	}
	if ents, err := os.ReadDir(empty); err != nil || len(ents) != 0 {
		t.Errorf("gc wrote into the empty directory: %v (%v)", ents, err)
	}
}
