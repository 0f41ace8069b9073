package main

import (
	"bytes"
	"strings"
	"testing"
)

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
		{"never", []string{"--progress", "never"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			args := append([]string{"savepoint", "cp", "v1", src, fileURL(t.TempDir())}, c.extra...)
			code := run(t.Context(), args, env{
				stdout:   &out,
				stderr:   &errb,
				getenv:   func(string) string { return "" },
				terminal: true,
			})
			bar := strings.Contains(errb.String(), "copy v1") && strings.Contains(errb.String(), "100%")
			if code != 0 || bar != c.wantBar {
				t.Fatalf("cp on a terminal with %v: exit %d, progress bar %v, want %v\nstderr: %q", c.extra, code, bar, c.wantBar, errb.String())
			}
		})
	}
}

// --progress always draws the bar off a terminal too (for logs that want
// it); an unknown value is a usage error.
func TestProgressAlwaysAndUsage(t *testing.T) {
	src := ranDemo(t)
	must(t, src, "savepoint", "create", "v1")
	_, errOut, code := tm(t, "", "savepoint", "cp", "v1", src, fileURL(t.TempDir()), "--progress", "always")
	if code != 0 || !strings.Contains(errOut, "copy v1") || !strings.Contains(errOut, "100%") {
		t.Fatalf("--progress always off a terminal: exit %d, stderr %q", code, errOut)
	}
	if _, _, code := tm(t, src, "ls", "--progress", "sometimes"); code != exitUsage {
		t.Fatalf("--progress sometimes: exit %d, want %d", code, exitUsage)
	}
}
