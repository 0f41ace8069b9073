// Package version reports which build of Tidemark is running: the module
// version and, for a binary built from a checkout, the VCS revision, its
// time and whether the work tree had uncommitted changes. It reads what
// the go command stamps into every binary (runtime/debug.ReadBuildInfo),
// so there is no version string to keep up to date by hand, and no
// -ldflags to remember.
//
// What a binary can say depends on how it was built:
//
//   - go install github.com/tidemark-io/tidemark/cmd/tidemark@v1.2.3:
//     version v1.2.3, no revision (the module cache holds no VCS data);
//   - go build in a git clone: a pseudo-version the go command derives
//     from the commit and the nearest tag (v0.0.0-20261201080000-61717a3414fd,
//     with +dirty for uncommitted changes), with revision, time and
//     modified;
//   - go build with -buildvcs=false, or in a git worktree (the go command
//     stamps nothing when .git is a file): version "(devel)", no revision;
//   - a program that imports Tidemark as a library: Tidemark's version as
//     its go.mod requires it, and no revision (the revision stamped in the
//     binary is that program's, not Tidemark's).
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"time"
)

// ModulePath is the path of the Tidemark module.
const ModulePath = "github.com/tidemark-io/tidemark"

// Devel is the module version the go command reports for the main
// module of a binary built from a checkout without a version it can
// derive.
const Devel = "(devel)"

// Unknown is the version reported when the binary carries no build
// information (built without module support).
const Unknown = "unknown"

// Build describes the running build of Tidemark. The JSON field names are
// snake_case, as the CLI's JSON output is.
type Build struct {
	// Version is Tidemark's module version: a semantic version, a
	// pseudo-version, Devel or Unknown.
	Version string `json:"version"`
	// Revision is the VCS revision the binary was built from, "" when not
	// known.
	Revision string `json:"revision,omitempty"`
	// Time is the commit time of Revision, zero when not known.
	Time time.Time `json:"time,omitzero"`
	// Modified reports that the work tree had uncommitted changes.
	Modified bool `json:"modified"`
	// GoVersion is the Go toolchain that built the binary.
	GoVersion string `json:"go_version"`
	// Platform is GOOS/GOARCH of the binary.
	Platform string `json:"platform"`
}

// Info returns the build of Tidemark in this binary.
func Info() Build {
	bi, ok := debug.ReadBuildInfo()
	return fromBuildInfo(bi, ok)
}

// String returns Info().String().
func String() string { return Info().String() }

// fromBuildInfo reads Tidemark's build from bi (ok false: there is none).
func fromBuildInfo(bi *debug.BuildInfo, ok bool) Build {
	b := Build{Version: Unknown, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if !ok || bi == nil {
		return b
	}
	if bi.GoVersion != "" {
		b.GoVersion = bi.GoVersion
	}
	if bi.Main.Path == ModulePath {
		b.Version = moduleVersion(bi.Main)
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Revision = s.Value
			case "vcs.time":
				if t, err := time.Parse(time.RFC3339, s.Value); err == nil {
					b.Time = t
				}
			case "vcs.modified":
				b.Modified = s.Value == "true"
			}
		}
		return b
	}
	for _, dep := range bi.Deps {
		if dep.Path == ModulePath {
			b.Version = moduleVersion(*dep)
			break
		}
	}
	return b
}

// moduleVersion returns m's version, or that of its replacement: a
// replacement by a local directory has none, and is then Devel.
func moduleVersion(m debug.Module) string {
	v := m.Version
	if m.Replace != nil {
		v = m.Replace.Version
	}
	if v == "" {
		return Devel
	}
	return v
}

// String is the one line `tidemark version` and `tidemark --version`
// print, such as
//
//	v1.2.3 (revision 5f5a94e1c2d3, 2026-12-01T08:00:00Z, modified) go1.26.8 linux/amd64
//
// The revision is shortened to 12 characters, as in a pseudo-version;
// Info has it whole.
func (b Build) String() string {
	var s strings.Builder
	s.WriteString(b.Version)
	if b.Revision != "" {
		rev := b.Revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		fmt.Fprintf(&s, " (revision %s", rev)
		if !b.Time.IsZero() {
			fmt.Fprintf(&s, ", %s", b.Time.UTC().Format(time.RFC3339))
		}
		if b.Modified {
			s.WriteString(", modified")
		}
		s.WriteString(")")
	}
	fmt.Fprintf(&s, " %s %s", b.GoVersion, b.Platform)
	return s.String()
}
