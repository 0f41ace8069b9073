package main

import (
	"strings"
	"testing"
)

// TestInvalidURLErrorQuotesTypedURL: the CLI adds parameters to the store
// URL it opens (must_exist for a read command, the demo's retry budget),
// but an invalid URL's error shows the URL as the user typed it, its
// password redacted, and exits 2.
func TestInvalidURLErrorQuotesTypedURL(t *testing.T) {
	for _, tc := range []struct {
		name, store string
		args        []string
		want        string   // in stderr
		notWant     []string // not in stderr
	}{
		{"ls file host", "file://tmp/x", []string{"ls"},
			`invalid store URL "file://tmp/x": host "tmp" is not local`, []string{"must_exist"}},
		{"show file param", "file:///tmp/x?lock_timeout=forever", []string{"show", "latest-completed"},
			`invalid store URL "file:///tmp/x?lock_timeout=forever": parameter lock_timeout="forever"`, []string{"must_exist"}},
		{"ls file password", "file://u:pw@tmp/x", []string{"ls"},
			`invalid store URL "file://u:xxxxx@tmp/x": file URLs take no user`, []string{"pw@", "must_exist"}},
		{"demo s3", "s3://bkt/job?endpoint=http://127.0.0.1:1&part_size=1MiB", demoArgs(t.TempDir(), "s3://bkt/job?endpoint=http://127.0.0.1:1&part_size=1MiB"),
			`invalid store URL s3://bkt/job?endpoint=http://127.0.0.1:1&part_size=1MiB: parameter part_size="1MiB"`,
			[]string{"max_attempts", "operation_timeout", "%3A%2F"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errOut, code := tm(t, tc.store, tc.args...)
			if code != exitUsage {
				t.Errorf("exit %d, want %d", code, exitUsage)
			}
			if !strings.Contains(errOut, tc.want) {
				t.Errorf("stderr %q does not say %q", errOut, tc.want)
			}
			for _, s := range tc.notWant {
				if strings.Contains(errOut, s) {
					t.Errorf("stderr %q shows %q, which the user did not type", errOut, s)
				}
			}
		})
	}
}

// TestUnknownSchemeListsSupportedSchemes: the CLI's error for an unknown
// scheme lists the schemes tidemark supports, not the library's hint to
// import a Go package, for every command that opens a URL.
func TestUnknownSchemeListsSupportedSchemes(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"ls"},
		{"savepoint", "create", "v1"},
		{"savepoint", "cp", "v1", "gs://b/p", fileURL(dir)},
		{"savepoint", "cp", "v1", fileURL(dir), "gs://b/p"},
		{"savepoint", "restore", "v1", "--from", "gs://b/p"},
		demoArgs(t.TempDir(), "gs://b/p"),
	} {
		t.Run(strings.Join(args[:min(len(args), 2)], " "), func(t *testing.T) {
			store := "gs://b/p"
			if args[0] == "savepoint" && (args[1] == "cp" || args[1] == "restore") {
				store = fileURL(t.TempDir())
			}
			_, errOut, code := tm(t, store, args...)
			if code != exitUsage {
				t.Errorf("exit %d, want %d\n%s", code, exitUsage, errOut)
			}
			if want := `unknown scheme "gs" (tidemark supports file, s3)`; !strings.Contains(errOut, want) {
				t.Errorf("stderr %q does not say %q", errOut, want)
			}
			if strings.Contains(errOut, "import") {
				t.Errorf("stderr %q gives the Go library's hint", errOut)
			}
		})
	}
}

// The CLI lists the same schemes whether the URL has none or an unknown
// one, and those are what it opens: mem:// (which would forget everything
// when the command exits) is not one of them. S3 URLs that name a bucket
// S3 cannot have, or carry a fragment, are usage errors too.
func TestStoreURLErrorsAgreeOnSchemes(t *testing.T) {
	for store, want := range map[string]string{
		"mem://x":         `unknown scheme "mem" (tidemark supports file, s3)`,
		"/tmp/x":          `no scheme (tidemark supports file, s3; for a directory: file:///tmp/x)`,
		"relative/dir":    `no scheme (tidemark supports file, s3)`,
		"s3://B_ad/p":     `bucket "B_ad": uppercase letters`,
		"s3://ab/p":       `bucket "ab": too short`,
		"s3://bkt/p#frag": `s3 URLs take no fragment`,
	} {
		_, errOut, code := tm(t, store, "ls")
		if code != exitUsage || !strings.Contains(errOut, want) {
			t.Errorf("ls --store %s: exit %d, want %d saying %q\n%s", store, code, exitUsage, want, errOut)
		}
	}
}
