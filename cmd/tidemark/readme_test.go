package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// commandPages are the pages whose commands the test runs, in the order
// a reader plays them: the README's quick start, then the demo's crash,
// resume and remote-state runs, then the CLI block, which reads the store
// they left.
var commandPages = []string{"README.md", "docs/demo.md", "docs/cli.md"}

// pageCommands returns, in order, the commands of one page as written:
// its `go run ./cmd/tidemark demo` and `rm -rf` lines, then the lines of
// each tested block (a fenced sh block after a "<!-- tested" marker).
func pageCommands(text string) (demo, tested []string) {
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "go run ./cmd/tidemark demo") || strings.HasPrefix(line, "rm -rf ") {
			demo = append(demo, line)
		}
	}
	for rest := text; ; {
		i := strings.Index(rest, "<!-- tested")
		if i < 0 {
			return demo, tested
		}
		block := rest[i:]
		start := strings.Index(block, "```sh\n") + len("```sh\n")
		end := strings.Index(block[start:], "```")
		for _, line := range strings.Split(block[start:start+end], "\n") {
			if strings.TrimSpace(line) != "" {
				tested = append(tested, line)
			}
		}
		rest = block[start+end:]
	}
}

// A docCommand is one command line of a page, as written.
type docCommand struct{ page, line string }

// readmeCommands returns, in order, the commands of every page in
// commandPages. It fails if the README lost its quick start, if no page
// has a tested CLI block, or if a page under docs/ outside commandPages
// holds commands of these forms (they would silently go unrun).
func readmeCommands(t *testing.T) []docCommand {
	t.Helper()
	root := "../.."
	var cmds []docCommand
	var demos, blocks int
	for _, page := range commandPages {
		b, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		demo, tested := pageCommands(string(b))
		if page == "README.md" && len(demo) == 0 {
			t.Fatal("the README lost its quick start (no go run ./cmd/tidemark demo line)")
		}
		demos += len(demo)
		if len(tested) > 0 {
			blocks++
		}
		for _, line := range append(demo, tested...) {
			cmds = append(cmds, docCommand{page, line})
		}
	}
	if demos < 2 || blocks == 0 {
		t.Fatalf("the documented commands lost the demo's runs (%d demo commands) or the tested CLI block (%d pages have one)", demos, blocks)
	}
	others, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range others {
		rel, _ := filepath.Rel(root, p)
		if slices.Contains(commandPages, filepath.ToSlash(rel)) {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if demo, tested := pageCommands(string(b)); len(demo)+len(tested) > 0 {
			t.Fatalf("%s has %d commands this test would not run; add it to commandPages where a reader plays it", rel, len(demo)+len(tested))
		}
	}
	return cmds
}

var shellVar = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?`)

// words splits a documented command line as a shell would for these simple
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

// The README's quick start, the demo's runs in docs/demo.md and the CLI
// block of docs/cli.md, run verbatim in a fresh directory against the file
// store, all succeed: they cannot drift from what the CLI does.
func TestReadmeCommandsRunAsWritten(t *testing.T) {
	cmds := readmeCommands(t)
	dir := t.TempDir()
	t.Chdir(dir)
	vars := map[string]string{"PWD": dir}
	gcPlan := ""
	for _, c := range cmds {
		page, line := c.page, c.line
		w := words(line, vars)
		switch {
		case len(w) == 2 && w[0] == "export":
			k, v, _ := strings.Cut(w[1], "=")
			vars[k] = v
			continue
		case len(w) >= 2 && w[0] == "rm" && w[1] == "-rf":
			for _, p := range w[2:] {
				if filepath.IsAbs(p) || !filepath.IsLocal(p) {
					t.Fatalf("%s line %q removes %q, outside the directory it runs in", page, line, p)
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
			t.Fatalf("%s line %q is not a tidemark command this test can run", page, line)
		}
		out, errOut, code := tmEnv(t, vars, w[1:]...)
		crash := strings.Contains(line, "--crash-after-records")
		switch {
		case crash && code != exitCrashed:
			t.Fatalf("%s command %q: exit %d, want the crash (%d)\nstdout: %s\nstderr: %s", page, line, code, exitCrashed, out, errOut)
		case crash:
			continue
		case code != 0:
			t.Fatalf("%s command %q: exit %d\nstdout: %s\nstderr: %s", page, line, code, out, errOut)
		}
		if strings.Contains(line, " demo") && !strings.Contains(out, "exactly-once: OK") {
			t.Fatalf("%s command %q did not end exactly-once OK:\n%s", page, line, out)
		}
		// The gc dry run lists what the --confirm run with the same flags
		// then deletes, as the CLI block's comments say.
		if w[1] == "gc" {
			if plan, ok := strings.CutPrefix(gcSummary(out), "would delete "); ok {
				gcPlan = plan
			} else if done, ok := strings.CutPrefix(gcSummary(out), "deleted "); !ok || gcPlan == "" || done != gcPlan {
				t.Fatalf("%s: gc --confirm deleted %q, not what its dry run listed (%q)", page, done, gcPlan)
			}
		}
		if strings.Contains(line, "--dir .tidemark-node2") && !strings.Contains(errOut, "resumed from checkpoint") {
			t.Fatalf("%s: the fresh node %q did not resume from the crashed job's checkpoint:\n%s", page, line, errOut)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, ".tidemark", "backup", "savepoints", "before-upgrade")); err != nil {
		t.Fatalf("the CLI block's savepoint cp left no copy: %v", err)
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

// The README's Go example is the job package's Example, line for line: a
// line of its go block that job/example_test.go does not hold means the
// README shows code that no test runs.
func TestReadmeGoExampleIsTheJobExample(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("../../job/example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	held := make(map[string]bool)
	for line := range strings.Lines(string(example)) {
		held[strings.TrimSpace(line)] = true
	}
	_, block, ok := strings.Cut(string(readme), "```go\n")
	block, _, closed := strings.Cut(block, "```")
	if !ok || !closed {
		t.Fatal("the README has no go block")
	}
	for line := range strings.Lines(block) {
		if l := strings.TrimSpace(line); l != "" && !held[l] {
			t.Errorf("README go line %q is not in job/example_test.go", l)
		}
	}
}
