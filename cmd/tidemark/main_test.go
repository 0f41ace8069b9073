package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
)

// tm runs the tidemark command in-process with args and returns its
// stdout, stderr and exit code. $TIDEMARK_STORE is storeEnvValue.
func tm(t *testing.T, storeEnvValue string, args ...string) (string, string, int) {
	t.Helper()
	return tmEnv(t, map[string]string{storeEnv: storeEnvValue}, args...)
}

// tmEnv runs the CLI as tm does, with vars as its whole environment.
func tmEnv(t *testing.T, vars map[string]string, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(t.Context(), args, env{
		stdout: &out,
		stderr: &errb,
		getenv: func(k string) string { return vars[k] },
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

func openURL(t *testing.T, u string) blobstore.Blobstore {
	t.Helper()
	bs, err := blobstore.Open(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	return bs
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

// Exit codes follow the conventions scripts rely on: a malformed store URL
// is a usage error (2), a corrupt record a verification failure (3), and a
// signal 128 + its number (130 for Ctrl-C, 143 for SIGTERM).
func TestExitCodes(t *testing.T) {
	for _, u := range []string{"nosuchscheme://x", "file:///tmp/x?bogus=1", "s3://bucket/p?part_size=lots", "::"} {
		if _, errOut, code := tm(t, u, "ls"); code != exitUsage {
			t.Errorf("ls --store %s: exit %d, want %d\n%s", u, code, exitUsage, errOut)
		}
	}
	store := ranDemo(t)
	var show struct {
		Checkpoint struct {
			ID string `json:"id"`
		} `json:"checkpoint"`
	}
	mustJSON(t, store, &show, "show", "latest-completed", "--output", "json")
	if err := openURL(t, store).Put(t.Context(), "checkpoints/"+show.Checkpoint.ID+"/checkpoint.json", strings.NewReader("{not json")); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := tm(t, store, "show", "latest-completed"); code != exitVerify {
		t.Errorf("show of a corrupt record: exit %d, want %d\n%s", code, exitVerify, errOut)
	}
	for sig, want := range map[syscall.Signal]int{syscall.SIGINT: 130, syscall.SIGTERM: 143} {
		ctx, cancel := context.WithCancelCause(t.Context())
		cancel(signalError{sig})
		if got := exitCode(ctx, fmt.Errorf("stopped: %w", context.Canceled)); got != want {
			t.Errorf("%v: exit %d, want %d", sig, got, want)
		}
		// A store that returns context.Cause(ctx) (the signal itself,
		// not context.Canceled): interrupted all the same.
		if got := exitCode(ctx, fmt.Errorf("gc: %w", context.Cause(ctx))); got != want {
			t.Errorf("%v, the cause returned: exit %d, want %d", sig, got, want)
		}
	}
}

// The interruption is said first, even when a layer below already named
// it in the middle of its message ("… (after interrupted …)").
func TestInterruptedErrorStartsWithTheSignal(t *testing.T) {
	ctx, cancel := context.WithCancelCause(t.Context())
	cancel(signalError{syscall.SIGINT})
	for _, err := range []error{
		fmt.Errorf("verify: read: %w (after %v)", context.Canceled, context.Cause(ctx)),
		fmt.Errorf("gc: %w", context.Cause(ctx)),
	} {
		got := interruptedError(ctx, err).Error()
		if !strings.HasPrefix(got, "interrupted (SIGINT, Ctrl-C): ") {
			t.Errorf("%v → %q, want it to start with the interruption", err, got)
		}
	}
}

// A command a signal stops says it was interrupted, not a bare "context
// canceled" from deep in the call, and exits 128 + the signal.
func TestInterruptedCommandSaysSo(t *testing.T) {
	store := ranDemo(t)
	for _, args := range [][]string{{"verify", "latest-completed"}, {"savepoint", "create", "sp1"}, {"ls"}} {
		ctx, cancel := context.WithCancelCause(t.Context())
		cancel(signalError{syscall.SIGINT})
		var out, errb bytes.Buffer
		code := run(ctx, args, env{stdout: &out, stderr: &errb, getenv: func(k string) string {
			if k == storeEnv {
				return store
			}
			return ""
		}})
		if code != exitInterrupted || !strings.Contains(errb.String(), "interrupted (SIGINT, Ctrl-C): ") {
			t.Errorf("tidemark %s, interrupted: exit %d, want %d saying it was interrupted\n%s", strings.Join(args, " "), code, exitInterrupted, errb.String())
		}
	}
	if _, _, code := tm(t, store, "savepoint", "ls"); code != exitOK {
		t.Errorf("savepoint ls after the interrupted commands: exit %d", code)
	}
}

// A mistyped command gets cobra's "did you mean" suggestion.
func TestMistypedCommandsGetSuggestions(t *testing.T) {
	_, errOut, code := tm(t, "", "verfy")
	if code != exitUsage || !strings.Contains(errOut, "Did you mean this?") || !strings.Contains(errOut, "verify") {
		t.Fatalf("tidemark verfy: exit %d\n%s", code, errOut)
	}
}
