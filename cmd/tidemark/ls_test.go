package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tidemark-io/tidemark/checkpoint"
)

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
	if !slices.Equal(last.Pointers, []string{"latest", "latest-completed"}) || last.Status != checkpoint.StatusCompleted || last.Size == 0 || last.Files == 0 {
		t.Fatalf("newest checkpoint %+v: want completed, both pointers, files", last)
	}
	// Scripts read the pointers as a JSON array, not a joined string.
	var raw struct {
		Checkpoints []map[string]json.RawMessage `json:"checkpoints"`
	}
	mustJSON(t, store, &raw, "ls")
	var ptrs []string
	if err := json.Unmarshal(raw.Checkpoints[len(raw.Checkpoints)-1]["pointers"], &ptrs); err != nil || len(ptrs) != 2 {
		t.Errorf(`ls --output json: "pointers" = %s (%v), want an array of the two pointers`, raw.Checkpoints[len(raw.Checkpoints)-1]["pointers"], err)
	}
	text := must(t, store, "ls")
	for _, want := range []string{"CHECKPOINT", last.ID, "latest-completed", "SAVEPOINT", "v1"} {
		if !strings.Contains(text, want) {
			t.Errorf("ls text output lacks %q:\n%s", want, text)
		}
	}
}

// A read command on a store path that does not exist is an error, not an
// empty store: a typo must not look like "no checkpoints" (finding 13).
func TestReadCommandsOnAMissingStorePathFail(t *testing.T) {
	store := fileURL(filepath.Join(t.TempDir(), "no", "such", "dir"))
	for _, args := range [][]string{{"ls"}, {"show", "latest"}, {"verify", "latest-completed"}, {"savepoint", "ls"}, {"gc"}} {
		out, errOut, code := tm(t, store, args...)
		if code != exitError || !strings.Contains(errOut, "does not exist") {
			t.Errorf("%v on a missing path: exit %d, want %d saying it does not exist\nstdout: %s\nstderr: %s", args, code, exitError, out, errOut)
		}
	}
}

// ls is the diagnosis tool: with a corrupt record or a pointer that
// dangles, names an invalid id or does not decode, it still lists every
// checkpoint and savepoint, shows what is wrong (text and JSON), and exits
// 3. show and verify of the bad pointer exit 3 too.
func TestLsListsEverythingAndExitsThreeOnDamage(t *testing.T) {
	good := ranDemo(t)
	must(t, good, "savepoint", "create", "v1")
	var before struct {
		Checkpoints []checkpointInfo `json:"checkpoints"`
	}
	mustJSON(t, good, &before, "ls")
	newest := before.Checkpoints[len(before.Checkpoints)-1].ID
	dangling := checkpoint.NewID(99999)
	cases := map[string]struct{ key, body, want string }{
		"dangling pointer": {"_latest-completed", `{"id":"` + dangling + `","epoch":1}`, dangling},
		"invalid pointer":  {"_latest-completed", `{"id":"../../etc","epoch":1}`, "../../etc"},
		"garbled pointer":  {"_latest", `{garbage`, "_latest"},
		"corrupt record":   {"checkpoints/" + newest + "/checkpoint.json", `{not json`, newest},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			store := fileURL(t.TempDir())
			copyStore(t, good, store)
			if err := openURL(t, store).Put(t.Context(), c.key, strings.NewReader(c.body)); err != nil {
				t.Fatal(err)
			}
			out, errOut, code := tm(t, store, "ls")
			// The listing names the damage; stderr says, once, that
			// there is some.
			if code != exitVerify || !strings.Contains(out, c.want) || !strings.Contains(out, "v1") ||
				!strings.Contains(errOut, "unreadable or damaged (listed above)") || strings.Contains(errOut, c.want) {
				t.Errorf("ls: exit %d, want %d naming %q in the listing only\nstdout: %s\nstderr: %s", code, exitVerify, c.want, out, errOut)
			}
			for _, ci := range before.Checkpoints {
				if !strings.Contains(out, ci.ID) {
					t.Errorf("ls does not list %s:\n%s", ci.ID, out)
				}
			}
			out, _, code = tm(t, store, "ls", "--output", "json")
			var ls struct {
				Checkpoints []checkpointInfo `json:"checkpoints"`
				Savepoints  []savepointInfo  `json:"savepoints"`
				Pointers    []pointerInfo    `json:"pointers"`
			}
			if err := json.Unmarshal([]byte(out), &ls); err != nil || code != exitVerify {
				t.Fatalf("ls --output json: exit %d, %v\n%s", code, err, out)
			}
			if len(ls.Checkpoints) != len(before.Checkpoints) || len(ls.Savepoints) != 1 || len(ls.Pointers) != 2 {
				t.Errorf("ls --output json: %+v", ls)
			}
			if !strings.Contains(out, `"error"`) || !strings.Contains(out, c.want) {
				t.Errorf("ls --output json does not show the damage:\n%s", out)
			}
			if c.key == "_latest-completed" {
				for _, args := range [][]string{{"show", "latest-completed"}, {"verify", "latest-completed"}} {
					out, errOut, code := tm(t, store, args...)
					if code != exitVerify || args[0] == "verify" && !strings.Contains(out, "FAILED") {
						t.Errorf("%v: exit %d, want %d (verify: FAILED)\nstdout: %s\nstderr: %s", args, code, exitVerify, out, errOut)
					}
				}
			}
		})
	}
}

// copyStore copies every object of the store src into dst.
func copyStore(t *testing.T, src, dst string) {
	t.Helper()
	from, to := openURL(t, src), openURL(t, dst)
	for o, err := range from.List(t.Context(), "") {
		if err != nil {
			t.Fatal(err)
		}
		rc, err := from.Get(t.Context(), o.Key)
		if err != nil {
			t.Fatal(err)
		}
		err = to.Put(t.Context(), o.Key, rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
}

// A command that needs a store to exist says that the directory does not
// exist, rather than print "ok" (probe) or "no savepoint" (rm, and cp and
// restore reading from it), and creates nothing.
func TestCommandsNeedingAStoreSayItsDirectoryDoesNotExist(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	store, other := fileURL(missing), fileURL(t.TempDir())
	for _, args := range [][]string{
		{"probe"},
		{"savepoint", "rm", "v1"},
		{"savepoint", "cp", "v1", store, other},
		{"savepoint", "restore", "v1", "--from", store, "--store", other},
		{"savepoint", "restore", "v1"},
	} {
		out, errOut, code := tm(t, store, args...)
		if code != exitError || !strings.Contains(errOut, "does not exist") || strings.Contains(out, "ok") {
			t.Errorf("%v on a missing directory: exit %d, want %d saying it does not exist\nstdout: %s\nstderr: %s", args, code, exitError, out, errOut)
		}
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("the missing directory was created (%v)", err)
	}
}
