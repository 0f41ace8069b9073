package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/tidemark-io/tidemark/blobstore"
)

// openStoreURL opens the store the user named as typed, through opened: typed
// with the parameters the CLI adds (must_exist for a read command, the
// demo's retry budget). An invalid URL's error quotes typed, not opened,
// so the message shows the URL the user wrote (its password, if any,
// redacted), and an unknown scheme lists the schemes tidemark supports
// (the library's error suggests importing a Go package).
//
// The encryption parameters (storeurl_encryption.go) are taken out first:
// with a key, the store is opened decorated by package encrypted.
func openStoreURL(ctx context.Context, typed, opened string) (blobstore.Blobstore, error) {
	key, typed, opened, err := storeEncryption(ctx, typed, opened)
	if err != nil {
		return nil, err
	}
	if u, err := url.Parse(typed); err == nil && u.Scheme == "" {
		hint := ""
		if strings.HasPrefix(u.Path, "/") {
			hint = fmt.Sprintf("; for a directory: %s", (&url.URL{Scheme: "file", Path: u.Path}).String())
		}
		return nil, fmt.Errorf("%w %q: no scheme (tidemark supports %s%s)",
			blobstore.ErrInvalidURL, u.Redacted(), strings.Join(cliSchemes, ", "), hint)
	} else if err == nil && !supportedScheme(u.Scheme) {
		return nil, fmt.Errorf("%w %q: unknown scheme %q (tidemark supports %s)",
			blobstore.ErrInvalidURL, u.Redacted(), u.Scheme, strings.Join(cliSchemes, ", "))
	}
	bs, err := blobstore.Open(ctx, opened)
	if err != nil && opened != typed && errors.Is(err, blobstore.ErrInvalidURL) {
		err = retyped(err, typed, opened)
	}
	if err != nil {
		return nil, err
	}
	return encrypt(bs, key)
}

// cliSchemes are the store schemes the CLI supports and documents (--help,
// docs/s3.md): the persistent ones. Any other scheme is refused, registered
// or not: mem:// (which the binary does not import) would forget
// everything when the command exits, so what the CLI lists is what it
// opens.
var cliSchemes = []string{"file", "s3"}

// testSchemes are schemes the tests register and the CLI opens too,
// unlisted (probetest://).
var testSchemes []string

func supportedScheme(scheme string) bool {
	for _, s := range append(slices.Clip(cliSchemes), testSchemes...) {
		if strings.EqualFold(s, scheme) {
			return true
		}
	}
	return false
}

// retyped returns err with the opened URL in its message replaced by the
// typed one (both redacted, as the store packages print them).
func retyped(err error, typed, opened string) error {
	tu, terr := url.Parse(typed)
	ou, oerr := url.Parse(opened)
	if terr != nil || oerr != nil {
		return err
	}
	msg, from, to := err.Error(), ou.Redacted(), tu.Redacted()
	for _, pair := range [][2]string{{strconv.Quote(from), strconv.Quote(to)}, {from, to}} {
		if strings.Contains(msg, pair[0]) {
			return urlError{msg: strings.ReplaceAll(msg, pair[0], pair[1]), err: err}
		}
	}
	return err
}

// urlError is an error with a rewritten message that still wraps the
// original (so it is ErrInvalidURL, exit code 2).
type urlError struct {
	msg string
	err error
}

func (e urlError) Error() string { return e.msg }
func (e urlError) Unwrap() error { return e.err }

// withParam appends name=value to its query as
// typed, without re-encoding the parameters already there.
func withParam(u *url.URL, name, value string) {
	p := url.QueryEscape(name) + "=" + url.QueryEscape(value)
	if u.RawQuery == "" {
		u.RawQuery = p
	} else {
		u.RawQuery += "&" + p
	}
}

// redactURL returns a store URL for a message, its password (if any)
// redacted.
func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil {
		return u.Redacted()
	}
	return s
}
