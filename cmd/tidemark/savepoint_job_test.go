package main

import (
	"maps"
	"strings"
	"testing"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
)

// storeBytes returns every object of bs with its content.
func storeBytes(t *testing.T, bs blobstore.Blobstore) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, k := range blobstoretest.ListKeys(t, bs, "") {
		out[k] = string(blobstoretest.Get(t, bs, k))
	}
	return out
}

// A savepoint of job A, copied to the store of job B and restored there,
// is refused with B byte for byte unchanged, naming both jobs and the
// way out; with --new-job it starts a new job on B, and the demo then
// runs it to the end exactly once (its output in B starts at the
// savepoint; job B's earlier output is not the new job's).
func TestSavepointRestoreOfAnotherJobIsRefusedUnlessNewJob(t *testing.T) {
	dirA := t.TempDir()
	storeA := fileURL(t.TempDir())
	if _, _, code := tm(t, "", demoArgs(dirA, storeA, "--crash-after-records", "9000")...); code != exitCrashed {
		t.Fatalf("crashing demo on A: exit %d, want %d", code, exitCrashed)
	}
	must(t, storeA, "savepoint", "create", "a1")
	// Job B counts other words: its output is not job A's.
	storeB := fileURL(t.TempDir())
	must(t, "", append(demoArgs(t.TempDir(), storeB), "--words", "120")...)
	must(t, "", "savepoint", "cp", "a1", storeA, storeB)

	bsB := openURL(t, storeB)
	before := storeBytes(t, bsB)
	_, errOut, code := tm(t, storeB, "savepoint", "restore", "a1")
	if code != exitError {
		t.Fatalf("restore of job A's savepoint on B: exit %d, want %d\n%s", code, exitError, errOut)
	}
	for _, s := range []string{"is of job job-", "holds the checkpoints of job job-", "--new-job", "nothing was changed"} {
		if !strings.Contains(errOut, s) {
			t.Errorf("refusal %q lacks %q", errOut, s)
		}
	}
	if after := storeBytes(t, bsB); !maps.Equal(before, after) {
		t.Fatalf("the refused restore changed store B (%d objects before, %d after)", len(before), len(after))
	}

	var res struct {
		Checkpoint string `json:"checkpoint"`
		Job        string `json:"job"`
		NewJob     bool   `json:"new_job"`
	}
	mustJSON(t, storeB, &res, "savepoint", "restore", "a1", "--new-job", "--output", "json")
	if !res.NewJob || !strings.HasPrefix(res.Job, "job-") {
		t.Fatalf("restore --new-job: %+v", res)
	}
	out := must(t, "", demoArgs(t.TempDir(), storeB)...)
	for _, s := range []string{"exactly-once: OK, 20000 records", "resumed from a savepoint"} {
		if !strings.Contains(out, s) {
			t.Errorf("demo of the new job on B: %q lacks %q", out, s)
		}
	}
}
