package logging

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	smithylogging "github.com/aws/smithy-go/logging"
)

// Each level shows its own records and those above, and none below.
func TestNewLevels(t *testing.T) {
	for i, level := range Levels {
		t.Run(level, func(t *testing.T) {
			var buf bytes.Buffer
			l, err := New(&buf, level, "text")
			if err != nil {
				t.Fatal(err)
			}
			l.Debug("m-debug")
			l.Info("m-info")
			l.Warn("m-warn")
			l.Error("m-error")
			for j, want := range Levels {
				shown := strings.Contains(buf.String(), "msg=m-"+want)
				if shown != (j >= i) {
					t.Errorf("--log-level %s: a %s record shown = %v\n%s", level, want, shown, buf.String())
				}
			}
		})
	}
}

func TestNewFormats(t *testing.T) {
	var buf bytes.Buffer
	l, err := New(&buf, "info", "json")
	if err != nil {
		t.Fatal(err)
	}
	l.Info("checkpoint completed", "id", "0000000042", "bytes", 1024)
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatalf("json format wrote %q: %v", buf.String(), err)
	}
	if rec["msg"] != "checkpoint completed" || rec["level"] != "INFO" || rec["id"] != "0000000042" || rec["bytes"] != float64(1024) {
		t.Errorf("json record = %v", rec)
	}

	buf.Reset()
	if l, err = New(&buf, "INFO", " Text "); err != nil {
		t.Fatalf("case and spaces: %v", err)
	}
	l.Info("hello", "k", "v")
	if got := buf.String(); !strings.Contains(got, "level=INFO msg=hello k=v") {
		t.Errorf("text format wrote %q", got)
	}
}

// A bad level or format is an error that names the value and what is
// accepted, wraps ErrInvalid (a usage error), and reports both at once.
func TestNewInvalid(t *testing.T) {
	tests := []struct {
		level, format string
		want          []string
	}{
		{"verbose", "text", []string{`log level "verbose"`, "debug, info, warn, error"}},
		{"info", "yaml", []string{`log format "yaml"`, "text, json"}},
		{"", "", []string{`log level ""`, `log format ""`}},
		{"warning", "logfmt", []string{`log level "warning"`, `log format "logfmt"`}},
	}
	for _, tt := range tests {
		l, err := New(&bytes.Buffer{}, tt.level, tt.format)
		if err == nil || l != nil {
			t.Errorf("New(%q, %q) = %v, %v; want an error", tt.level, tt.format, l, err)
			continue
		}
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("New(%q, %q): %v does not wrap ErrInvalid", tt.level, tt.format, err)
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("New(%q, %q): %q does not say %q", tt.level, tt.format, err, w)
			}
		}
	}
	if _, err := New(nil, "info", "text"); err == nil {
		t.Error("New accepted a nil writer")
	}
}

// The SDK's lines go through the logger: WARN at warn, DEBUG at debug,
// formatted with their verbs, marked as the SDK's, one line each.
func TestAWS(t *testing.T) {
	var buf bytes.Buffer
	l, err := New(&buf, "debug", "json")
	if err != nil {
		t.Fatal(err)
	}
	sdk := AWS(l)
	sdk.Logf(smithylogging.Warn, "Response has no supported checksum. Not validating response payload for %s.\n", "GetObject")
	sdk.Logf(smithylogging.Debug, "retrying request %d", 2)
	smithylogging.WithContext(context.Background(), sdk).Logf("TRACE", "unknown classification")

	var recs []map[string]any
	for line := range strings.Lines(buf.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		recs = append(recs, rec)
	}
	want := []struct{ level, msg string }{
		{"WARN", "Response has no supported checksum. Not validating response payload for GetObject."},
		{"DEBUG", "retrying request 2"},
		{"DEBUG", "unknown classification"},
	}
	if len(recs) != len(want) {
		t.Fatalf("got %d records, want %d:\n%s", len(recs), len(want), buf.String())
	}
	for i, w := range want {
		if recs[i]["level"] != w.level || recs[i]["msg"] != w.msg || recs[i]["source"] != "aws-sdk" {
			t.Errorf("record %d = %v, want level %s, msg %q, source aws-sdk", i, recs[i], w.level, w.msg)
		}
	}

	// At the default level the SDK's debug lines are dropped, unformatted.
	buf.Reset()
	if l, err = New(&buf, "info", "text"); err != nil {
		t.Fatal(err)
	}
	AWS(l).Logf(smithylogging.Debug, "%v", panicky{})
	if buf.Len() != 0 {
		t.Errorf("a debug line was written at info: %q", buf.String())
	}
}

// panicky fails the test if it is ever formatted.
type panicky struct{}

func (panicky) String() string { panic("formatted a message that was not logged") }

func TestParse(t *testing.T) {
	if lvl, err := ParseLevel("Warn"); err != nil || lvl != slog.LevelWarn {
		t.Errorf("ParseLevel(Warn) = %v, %v", lvl, err)
	}
	if f, err := ParseFormat("JSON"); err != nil || f != JSON {
		t.Errorf("ParseFormat(JSON) = %v, %v", f, err)
	}
}
