package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

var snakeCase = regexp.MustCompile(`^[a-z0-9]+(_[a-z0-9]+)*$`)

// checkJSON walks a decoded JSON value: every object key is snake_case
// (or data: the keys under "files" are owners, under "operators" indexes,
// under "offsets" the source's), and no list is null.
func checkJSON(t *testing.T, where string, v any, dataKeys bool) {
	t.Helper()
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if !dataKeys && !snakeCase.MatchString(k) {
				t.Errorf("%s: key %q is not snake_case", where, k)
			}
			checkJSON(t, where+"."+k, x, k == "files" || k == "operators" || k == "offsets" || k == "counts")
		}
	case []any:
		for i, x := range v {
			checkJSON(t, where+"[]", x, false)
			_ = i
		}
	}
}

// Every command's --output json decodes, uses snake_case keys, and does
// not HTML-escape (a URL's & stays &).
func TestEveryCommandsJSONDecodes(t *testing.T) {
	dir := t.TempDir()
	store := fileURL(dir + "/store")
	if _, _, code := tm(t, "", demoArgs(dir, store, "--crash-after-records", "14000")...); code != exitCrashed {
		t.Fatalf("crashing demo: exit %d", code)
	}
	must(t, store, "savepoint", "create", "v1")
	dst := fileURL(t.TempDir())
	for _, args := range [][]string{
		{"ls"},
		{"show", "latest-completed"},
		{"verify", "latest-completed"},
		{"verify", "v1"},
		{"savepoint", "ls"},
		{"savepoint", "cp", "v1", store, dst},
		{"gc"},
		{"probe"},
		append(demoArgs(dir, store), "--dir", t.TempDir()),
		{"savepoint", "restore", "v1"},
		{"savepoint", "rm", "v1"},
	} {
		name := strings.Join(args[:min(2, len(args))], " ")
		t.Run(name, func(t *testing.T) {
			out, errOut, code := tm(t, store, append(args, "--output", "json")...)
			if code != 0 {
				t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
			}
			var v any
			if err := json.Unmarshal([]byte(out), &v); err != nil {
				t.Fatalf("not JSON: %v\n%s", err, out)
			}
			checkJSON(t, name, v, false)
			if strings.Contains(out, `\u0026`) {
				t.Errorf("HTML-escaped output: %s", out)
			}
		})
	}
}
