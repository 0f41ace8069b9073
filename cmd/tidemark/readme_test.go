package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readmeCommands returns, in order, the commands of the README's quick
// start (the `go run ./cmd/tidemark demo` lines) and of its tested CLI
// block (the fenced block after the "<!-- tested" marker), as written.
func readmeCommands(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	var cmds []string
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "go run ./cmd/tidemark demo") || strings.HasPrefix(line, "rm -rf ") {
			cmds = append(cmds, line)
		}
	}
	i := strings.Index(text, "<!-- tested")
	if i < 0 || len(cmds) < 2 {
		t.Fatalf("the README lost its quick start (%d demo commands) or its tested CLI block", len(cmds))
	}
	block := text[i:]
	start := strings.Index(block, "```sh\n") + len("```sh\n")
	end := strings.Index(block[start:], "```")
	for _, line := range strings.Split(block[start:start+end], "\n") {
		if strings.TrimSpace(line) != "" {
			cmds = append(cmds, line)
		}
	}
	return cmds
}

var shellVar = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?`)

// words splits a README command line as a shell would for these simple
// lines: a trailing comment dropped, variables expanded, single quotes
// kept literal.
func words(line string, vars map[string]string) []string {
	var out []string
	var cur strings.Builder
	inQuote, inWord := false, false
	expand := func(s string) string {
		return shellVar.ReplaceAllStringFunc(s, func(m string) string {
			return vars[shellVar.FindStringSubmatch(m)[1]]
		})
	}
	flush := func() {
		if inWord {
			out = append(out, cur.String())
			cur.Reset()
			inWord = false
		}
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\'':
			inQuote, inWord = !inQuote, true
		case inQuote:
			cur.WriteByte(c)
		case c == '#' && !inWord:
			flush()
			return out
		case c == ' ' || c == '\t':
			flush()
		default:
			j := i
			for j < len(line) && line[j] != ' ' && line[j] != '\t' && line[j] != '\'' {
				j++
			}
			cur.WriteString(expand(line[i:j]))
			inWord = true
			i = j - 1
		}
	}
	flush()
	return out
}

// The README's quick start and CLI commands, run verbatim in a fresh
// directory against the file store, all succeed: they cannot drift from
// what the CLI does.
func TestReadmeCommandsRunAsWritten(t *testing.T) {
	cmds := readmeCommands(t)
	dir := t.TempDir()
	t.Chdir(dir)
	vars := map[string]string{"PWD": dir}
	gcPlan := ""
	for _, line := range cmds {
		w := words(line, vars)
		switch {
		case len(w) == 2 && w[0] == "export":
			k, v, _ := strings.Cut(w[1], "=")
			vars[k] = v
			continue
		case len(w) >= 2 && w[0] == "rm" && w[1] == "-rf":
			for _, p := range w[2:] {
				if filepath.IsAbs(p) || !filepath.IsLocal(p) {
					t.Fatalf("README line %q removes %q, outside the directory it runs in", line, p)
				}
				if err := os.RemoveAll(p); err != nil {
					t.Fatal(err)
				}
			}
			continue
		case len(w) >= 3 && w[0] == "go" && w[1] == "run":
			w = append([]string{"tidemark"}, w[3:]...)
		}
		if len(w) == 0 || w[0] != "tidemark" {
			t.Fatalf("README line %q is not a tidemark command this test can run", line)
		}
		out, errOut, code := tmEnv(t, vars, w[1:]...)
		crash := strings.Contains(line, "--crash-after-records")
		switch {
		case crash && code != exitCrashed:
			t.Fatalf("README command %q: exit %d, want the crash (%d)\nstdout: %s\nstderr: %s", line, code, exitCrashed, out, errOut)
		case crash:
			continue
		case code != 0:
			t.Fatalf("README command %q: exit %d\nstdout: %s\nstderr: %s", line, code, out, errOut)
		}
		if strings.Contains(line, " demo") && !strings.Contains(out, "exactly-once: OK") {
			t.Fatalf("README command %q did not end exactly-once OK:\n%s", line, out)
		}
		// The gc dry run lists what the --confirm run with the same flags
		// then deletes, as the README's comments say.
		if w[1] == "gc" {
			if plan, ok := strings.CutPrefix(gcSummary(out), "would delete "); ok {
				gcPlan = plan
			} else if done, ok := strings.CutPrefix(gcSummary(out), "deleted "); !ok || gcPlan == "" || done != gcPlan {
				t.Fatalf("README's gc --confirm deleted %q, not what its dry run listed (%q)", done, gcPlan)
			}
		}
		if strings.Contains(line, "--dir .tidemark-node2") && !strings.Contains(errOut, "resumed from checkpoint") {
			t.Fatalf("README's fresh node %q did not resume from the crashed job's checkpoint:\n%s", line, errOut)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, ".tidemark", "backup", "savepoints", "before-upgrade")); err != nil {
		t.Fatalf("the README's savepoint cp left no copy: %v", err)
	}
}

// gcSummary returns what gc's output says it deleted or would delete
// ("would delete 1 checkpoints [ckpt-…], 11 objects (10.4 KiB), …"), "" if
// it says neither.
func gcSummary(out string) string {
	for line := range strings.Lines(out) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "gc: "); ok &&
			(strings.HasPrefix(rest, "would delete ") || strings.HasPrefix(rest, "deleted ")) {
			return rest
		}
	}
	return ""
}
