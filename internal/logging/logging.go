// Package logging builds the CLI's log/slog logger from its --log-level
// and --log-format flags, and routes the AWS SDK's own log lines through
// the same logger, so that nothing reaches the terminal in another
// format.
package logging

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	smithylogging "github.com/aws/smithy-go/logging"
)

// Levels are the values --log-level accepts, most verbose first.
var Levels = []string{"debug", "info", "warn", "error"}

// Formats are the values --log-format accepts.
var Formats = []string{"text", "json"}

// ErrInvalid is wrapped by the error of New, ParseLevel and ParseFormat
// for a value they do not accept, so that a CLI can report it as a usage
// error.
var ErrInvalid = errors.New("invalid value")

// Format is a log output format.
type Format string

// The log formats.
const (
	Text Format = "text" // slog.TextHandler: key=value pairs
	JSON Format = "json" // slog.JSONHandler: one JSON object per line
)

// ParseLevel parses a --log-level value (case does not matter).
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("log level %q: %w: want one of %s", s, ErrInvalid, strings.Join(Levels, ", "))
}

// ParseFormat parses a --log-format value (case does not matter).
func ParseFormat(s string) (Format, error) {
	switch f := Format(strings.ToLower(strings.TrimSpace(s))); f {
	case Text, JSON:
		return f, nil
	}
	return "", fmt.Errorf("log format %q: %w: want one of %s", s, ErrInvalid, strings.Join(Formats, ", "))
}

// New returns a logger writing records at level and above to w in format.
// An unknown level or format is an error wrapping ErrInvalid that names
// the accepted values; both are checked before anything is built.
func New(w io.Writer, level, format string) (*slog.Logger, error) {
	if w == nil {
		return nil, errors.New("logging: nil writer")
	}
	lvl, lerr := ParseLevel(level)
	f, ferr := ParseFormat(format)
	if err := errors.Join(lerr, ferr); err != nil {
		return nil, err
	}
	opts := &slog.HandlerOptions{Level: lvl}
	if f == JSON {
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), nil
}

// AWS returns a logger for the AWS SDK (config.WithLogger) that writes
// through l: the SDK's WARN lines at slog.LevelWarn, DEBUG lines (and any
// other classification) at slog.LevelDebug, each with the attribute
// source=aws-sdk. The SDK formats its message with fmt verbs, so the
// message is formatted only when l would record it.
func AWS(l *slog.Logger) smithylogging.Logger {
	return &awsLogger{l: l.With("source", "aws-sdk"), ctx: context.Background()}
}

type awsLogger struct {
	l   *slog.Logger
	ctx context.Context
}

var (
	_ smithylogging.Logger        = (*awsLogger)(nil)
	_ smithylogging.ContextLogger = (*awsLogger)(nil)
)

func (a *awsLogger) Logf(c smithylogging.Classification, format string, v ...any) {
	level := slog.LevelDebug
	if c == smithylogging.Warn {
		level = slog.LevelWarn
	}
	if !a.l.Enabled(a.ctx, level) {
		return
	}
	a.l.Log(a.ctx, level, strings.TrimRight(fmt.Sprintf(format, v...), "\n"))
}

// WithContext implements smithylogging.ContextLogger, so that handlers
// that read the context (trace ids) see the request's.
func (a *awsLogger) WithContext(ctx context.Context) smithylogging.Logger {
	return &awsLogger{l: a.l, ctx: ctx}
}
