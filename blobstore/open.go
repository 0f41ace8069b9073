package blobstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
)

// Opener opens a Blobstore from a parsed URL. Implementations register one
// per scheme with Register.
type Opener func(ctx context.Context, u *url.URL) (Blobstore, error)

var (
	registryMu sync.RWMutex
	registry   = map[string]Opener{}
)

// Register makes an Opener available under scheme (for example "file" or
// "s3"). It is meant to be called from an implementation's init, and
// panics if the scheme is registered twice or opener is nil.
func Register(scheme string, opener Opener) {
	registryMu.Lock()
	defer registryMu.Unlock()
	scheme = strings.ToLower(scheme)
	if opener == nil {
		panic("blobstore: Register opener is nil")
	}
	if _, dup := registry[scheme]; dup {
		panic("blobstore: Register called twice for scheme " + scheme)
	}
	registry[scheme] = opener
}

// Schemes returns the registered URL schemes, sorted.
func Schemes() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	s := make([]string, 0, len(registry))
	for k := range registry {
		s = append(s, k)
	}
	slices.Sort(s)
	return s
}

// ErrInvalidURL is wrapped by Open's error for a URL that cannot name a
// store; store packages wrap it in their URL parsing errors too.
var ErrInvalidURL = errors.New("blobstore: invalid store URL")

// Open opens the Blobstore that rawURL names, with the Opener registered
// for its scheme. A URL without a scheme is an error: the caller says
// which store it means. Import the implementation for its side effect to
// register it (see the package documentation).
//
// A URL that cannot name a store (no or an unknown scheme, a parameter
// the store does not take or a malformed value) is an error wrapping
// ErrInvalidURL, returned before any I/O.
func Open(ctx context.Context, rawURL string) (Blobstore, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w %q: %w", ErrInvalidURL, rawURL, err)
	}
	if u.Scheme == "" {
		return nil, fmt.Errorf("%w %q: no scheme (want one of %s)", ErrInvalidURL, u.Redacted(), strings.Join(Schemes(), ", "))
	}
	registryMu.RLock()
	opener, ok := registry[strings.ToLower(u.Scheme)]
	registryMu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w %q: unknown scheme %q (registered: %s; forgot to import the store package?)",
			ErrInvalidURL, u.Redacted(), u.Scheme, strings.Join(Schemes(), ", "))
	}
	return opener(ctx, u)
}

type loggerKey struct{}

// ContextWithLogger returns ctx carrying l, for the stores Open opens with
// it: a store logs its client's own diagnostics (s3store: the AWS SDK's
// warnings) through l instead of to the terminal.
func ContextWithLogger(ctx context.Context, l *slog.Logger) context.Context {
	return context.WithValue(ctx, loggerKey{}, l)
}

// LoggerFromContext returns the logger ContextWithLogger put in ctx, or
// nil.
func LoggerFromContext(ctx context.Context) *slog.Logger {
	l, _ := ctx.Value(loggerKey{}).(*slog.Logger)
	return l
}
