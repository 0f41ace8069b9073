package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/encrypted"
)

// The store URL parameters and variable that turn on client-side
// encryption (docs/encryption.md). The CLI takes the parameters out of
// the URL before opening it: the store packages refuse unknown ones.
const (
	// paramKeyFile names a file holding the master key (32 raw bytes or
	// their base64).
	paramKeyFile = "encryption_key_file"
	// paramEncryption=off opens a store plain even when keyEnv is set,
	// to copy a savepoint from an encrypted store to a plain one.
	paramEncryption = "encryption"
	// keyEnv holds the base64 of a master key used for every store URL
	// without encryption parameters.
	keyEnv = "TIDEMARK_ENCRYPTION_KEY"
)

type getenvKey struct{}

// withGetenv returns ctx carrying the command's environment, so that
// openStoreURL reads $TIDEMARK_ENCRYPTION_KEY where the tests put it.
func withGetenv(ctx context.Context, getenv func(string) string) context.Context {
	return context.WithValue(ctx, getenvKey{}, getenv)
}

func getenvFrom(ctx context.Context) func(string) string {
	if g, ok := ctx.Value(getenvKey{}).(func(string) string); ok && g != nil {
		return g
	}
	return func(string) string { return "" }
}

// storeEncryption takes the encryption parameters out of the URLs typed
// and opened and returns the key they (or the environment) name: nil for
// a plain store. A key that cannot be loaded is a usage error, before
// anything is opened.
func storeEncryption(ctx context.Context, typed, opened string) (key *encrypted.Key, typedOut, openedOut string, err error) {
	tu, terr := url.Parse(typed)
	if terr != nil {
		return nil, typed, opened, nil // openStoreURL reports the bad URL
	}
	q, err := url.ParseQuery(tu.RawQuery)
	if err != nil {
		return nil, typed, opened, nil
	}
	file, hasFile := q[paramKeyFile]
	mode, hasMode := q[paramEncryption]
	if !hasFile && !hasMode {
		v := getenvFrom(ctx)(keyEnv)
		if strings.TrimSpace(v) == "" {
			return nil, typed, opened, nil
		}
		k, err := encrypted.ParseKeyBase64(v)
		if err != nil {
			return nil, "", "", usageError{fmt.Errorf("$%s: %w", keyEnv, err)}
		}
		return &k, typed, opened, nil
	}
	typedOut, openedOut = dropParams(typed), dropParams(opened)
	switch {
	case hasMode && (len(mode) != 1 || mode[0] != "off"):
		return nil, "", "", usageError{fmt.Errorf("%w %q: %s=%s: the only value is off", blobstore.ErrInvalidURL, tu.Redacted(), paramEncryption, strings.Join(mode, ","))}
	case hasMode && hasFile:
		return nil, "", "", usageError{fmt.Errorf("%w %q: %s=off and %s together", blobstore.ErrInvalidURL, tu.Redacted(), paramEncryption, paramKeyFile)}
	case hasMode:
		return nil, typedOut, openedOut, nil
	case len(file) != 1 || file[0] == "":
		return nil, "", "", usageError{fmt.Errorf("%w %q: %s wants one path", blobstore.ErrInvalidURL, tu.Redacted(), paramKeyFile)}
	}
	k, err := encrypted.LoadKeyFile(file[0])
	if err != nil {
		return nil, "", "", usageError{err}
	}
	return &k, typedOut, openedOut, nil
}

// dropParams returns s without the encryption parameters in its query,
// the others left as typed (not re-encoded).
func dropParams(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return s
	}
	var kept []string
	for _, p := range strings.Split(u.RawQuery, "&") {
		name, _, _ := strings.Cut(p, "=")
		if n, err := url.QueryUnescape(name); err == nil && (n == paramKeyFile || n == paramEncryption) {
			continue
		}
		if p != "" {
			kept = append(kept, p)
		}
	}
	u.RawQuery = strings.Join(kept, "&")
	return u.String()
}

// encrypt returns bs decorated with key or, when key is nil, with
// encrypted.Detect: a read of an encrypted object then names the key id
// it needs instead of failing as corrupt.
func encrypt(bs blobstore.Blobstore, key *encrypted.Key) (blobstore.Blobstore, error) {
	if key == nil {
		return encrypted.Detect(bs, encrypted.Options{}), nil
	}
	return encrypted.New(bs, *key, encrypted.Options{})
}
