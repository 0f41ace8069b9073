package blobstore

import (
	"context"
	"fmt"
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

// Open opens the Blobstore that rawURL names, with the Opener registered
// for its scheme. A URL without a scheme is an error: the caller says
// which store it means. Import the implementation for its side effect to
// register it (see the package documentation).
func Open(ctx context.Context, rawURL string) (Blobstore, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("blobstore: open %q: %w", rawURL, err)
	}
	if u.Scheme == "" {
		return nil, fmt.Errorf("blobstore: open %q: no scheme (want one of %s)", rawURL, strings.Join(Schemes(), ", "))
	}
	registryMu.RLock()
	opener, ok := registry[strings.ToLower(u.Scheme)]
	registryMu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("blobstore: open %q: unknown scheme %q (registered: %s; forgot to import the store package?)",
			rawURL, u.Scheme, strings.Join(Schemes(), ", "))
	}
	return opener(ctx, u)
}
