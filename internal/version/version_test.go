package version

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

func TestFromBuildInfo(t *testing.T) {
	commit := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	platform := runtime.GOOS + "/" + runtime.GOARCH
	tests := []struct {
		name string
		bi   *debug.BuildInfo
		ok   bool
		want Build
	}{
		{
			name: "no build info",
			want: Build{Version: Unknown, GoVersion: runtime.Version(), Platform: platform},
		},
		{
			name: "built from a checkout",
			ok:   true,
			bi: &debug.BuildInfo{
				GoVersion: "go1.26.8",
				Main:      debug.Module{Path: ModulePath, Version: Devel},
				Settings: []debug.BuildSetting{
					{Key: "-trimpath", Value: "true"},
					{Key: "vcs", Value: "git"},
					{Key: "vcs.revision", Value: "5f5a94e1c2d3b4a5968778695a4b3c2d1e0f1a2b"},
					{Key: "vcs.time", Value: "2026-12-01T08:00:00Z"},
					{Key: "vcs.modified", Value: "true"},
				},
			},
			want: Build{Version: Devel, Revision: "5f5a94e1c2d3b4a5968778695a4b3c2d1e0f1a2b", Time: commit, Modified: true, GoVersion: "go1.26.8", Platform: platform},
		},
		{
			name: "go install at a version",
			ok:   true,
			bi: &debug.BuildInfo{
				GoVersion: "go1.26.8",
				Main:      debug.Module{Path: ModulePath, Version: "v0.3.1"},
			},
			want: Build{Version: "v0.3.1", GoVersion: "go1.26.8", Platform: platform},
		},
		{
			name: "a library of another program",
			ok:   true,
			bi: &debug.BuildInfo{
				GoVersion: "go1.26.8",
				Main:      debug.Module{Path: "example.com/job", Version: "v2.0.0"},
				Deps: []*debug.Module{
					{Path: "github.com/spf13/cobra", Version: "v1.10.2"},
					{Path: ModulePath, Version: "v0.4.0"},
				},
				// The program's own revision says nothing about Tidemark's.
				Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789ab"}},
			},
			want: Build{Version: "v0.4.0", GoVersion: "go1.26.8", Platform: platform},
		},
		{
			name: "replaced by a local directory",
			ok:   true,
			bi: &debug.BuildInfo{
				GoVersion: "go1.26.8",
				Main:      debug.Module{Path: "example.com/job"},
				Deps: []*debug.Module{
					{Path: ModulePath, Version: "v0.4.0", Replace: &debug.Module{Path: "../tidemark"}},
				},
			},
			want: Build{Version: Devel, GoVersion: "go1.26.8", Platform: platform},
		},
		{
			name: "replaced by another version",
			ok:   true,
			bi: &debug.BuildInfo{
				Main: debug.Module{Path: "example.com/job"},
				Deps: []*debug.Module{
					{Path: ModulePath, Version: "v0.4.0", Replace: &debug.Module{Path: "example.com/fork", Version: "v0.4.1-fix"}},
				},
			},
			want: Build{Version: "v0.4.1-fix", GoVersion: runtime.Version(), Platform: platform},
		},
		{
			name: "not linked in",
			ok:   true,
			bi:   &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "example.com/job"}},
			want: Build{Version: Unknown, GoVersion: "go1.26.8", Platform: platform},
		},
		{
			name: "unparsable vcs.time is left out",
			ok:   true,
			bi: &debug.BuildInfo{
				GoVersion: "go1.26.8",
				Main:      debug.Module{Path: ModulePath, Version: Devel},
				Settings:  []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.time", Value: "yesterday"}, {Key: "vcs.modified", Value: "false"}},
			},
			want: Build{Version: Devel, Revision: "abc", GoVersion: "go1.26.8", Platform: platform},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fromBuildInfo(tt.bi, tt.ok); got != tt.want {
				t.Errorf("fromBuildInfo =\n  %+v\nwant\n  %+v", got, tt.want)
			}
		})
	}
}

func TestString(t *testing.T) {
	tests := []struct {
		b    Build
		want string
	}{
		{
			Build{Version: Devel, Revision: "5f5a94e1c2d3b4a5968778695a4b3c2d1e0f1a2b", Time: time.Date(2026, 12, 1, 9, 0, 0, 0, time.FixedZone("CET", 3600)), Modified: true, GoVersion: "go1.26.8", Platform: "linux/arm64"},
			"(devel) (revision 5f5a94e1c2d3, 2026-12-01T08:00:00Z, modified) go1.26.8 linux/arm64",
		},
		{
			Build{Version: "v0.3.1", Revision: "abc", GoVersion: "go1.26.8", Platform: "darwin/arm64"},
			"v0.3.1 (revision abc) go1.26.8 darwin/arm64",
		},
		{
			Build{Version: "v0.3.1", GoVersion: "go1.26.8", Platform: "linux/amd64"},
			"v0.3.1 go1.26.8 linux/amd64",
		},
	}
	for _, tt := range tests {
		if got := tt.b.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
}

func TestJSONFieldNames(t *testing.T) {
	b := Build{Version: "v1.0.0", Revision: "abc", Time: time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC), GoVersion: "go1.26.8", Platform: "linux/amd64"}
	out, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"version":"v1.0.0","revision":"abc","time":"2026-12-01T08:00:00Z","modified":false,"go_version":"go1.26.8","platform":"linux/amd64"}`
	if string(out) != want {
		t.Errorf("JSON = %s\nwant   %s", out, want)
	}
	out, err = json.Marshal(Build{Version: Devel, GoVersion: "go1.26.8", Platform: "linux/amd64"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), `"time"`) || strings.Contains(string(out), `"revision"`) {
		t.Errorf("JSON of a build without VCS data has time or revision: %s", out)
	}
}

// TestInfoInTestBinary checks that Info finds Tidemark as the main module
// of this test binary (the go command stamps no VCS data into tests).
func TestInfoInTestBinary(t *testing.T) {
	b := Info()
	if b.Version == Unknown || b.Version == "" {
		t.Errorf("Info().Version = %q in a test of the module", b.Version)
	}
	if b.GoVersion != runtime.Version() {
		t.Errorf("Info().GoVersion = %q, want %q", b.GoVersion, runtime.Version())
	}
}

// TestStampedBinary builds a program that prints Info, from a throwaway
// git repository holding this package, and checks that it reports the
// revision, time and modified state the go command stamps. It builds in
// a repository of its own rather than in this checkout because the go
// command stamps nothing in a git worktree (.git is a file there), and so
// that the state of the developer's checkout does not matter.
func TestStampedBinary(t *testing.T) {
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Skip("SKIP: git is not installed; cannot check VCS stamping")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("SKIP: the go command is not on PATH; cannot build a stamped binary")
	}

	repo := t.TempDir()
	copyFile(t, "version.go", filepath.Join(repo, "internal", "version", "version.go"))
	copyFile(t, filepath.Join("testdata", "printversion", "main.go"), filepath.Join(repo, "cmd", "printversion", "main.go"))
	writeFile(t, filepath.Join(repo, "go.mod"), "module "+ModulePath+"\n\ngo 1.26\n")

	env := append(os.Environ(),
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull,
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com",
		"GIT_COMMITTER_DATE=2026-12-01T08:00:00Z", "GIT_AUTHOR_DATE=2026-12-01T08:00:00Z",
		// A go env file may say -buildvcs=false; this test is about stamping.
		"GOFLAGS=-buildvcs=true", "GOWORK=off", "GOTOOLCHAIN=local", "GOPROXY=off",
	)
	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), name, args...)
		cmd.Dir, cmd.Env = repo, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	build := func() Build {
		t.Helper()
		exe := filepath.Join(t.TempDir(), "printversion")
		run(goBin, "build", "-trimpath", "-o", exe, "./cmd/printversion")
		out := run(exe)
		var b Build
		if err := json.Unmarshal([]byte(out), &b); err != nil {
			t.Fatalf("printversion printed %q: %v", out, err)
		}
		return b
	}

	run(gitBin, "init", "-q")
	run(gitBin, "add", ".")
	run(gitBin, "commit", "-q", "-m", "test")
	head := run(gitBin, "rev-parse", "HEAD")

	b := build()
	if b.Revision != head {
		t.Errorf("Revision = %q, want HEAD %q", b.Revision, head)
	}
	if want := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC); !b.Time.Equal(want) {
		t.Errorf("Time = %v, want the commit time %v", b.Time, want)
	}
	if b.Modified {
		t.Error("Modified = true for a clean work tree")
	}
	if b.Version == Unknown || b.Version == "" {
		t.Errorf("Version = %q", b.Version)
	}
	t.Logf("clean build: %s", b)

	writeFile(t, filepath.Join(repo, "go.mod"), "module "+ModulePath+"\n\ngo 1.26\n\n// edited\n")
	if b := build(); !b.Modified || b.Revision != head {
		t.Errorf("after an edit: Modified = %v, Revision = %q; want true, %q", b.Modified, b.Revision, head)
	}
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dst, string(data))
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}
