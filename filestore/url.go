package filestore

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tidemark-io/tidemark/blobstore"
)

func init() {
	blobstore.Register("file", OpenURL)
}

// OpenURL opens the Store a file URL names. It is the opener registered
// for the "file" scheme; see the package documentation for the forms it
// accepts.
func OpenURL(ctx context.Context, u *url.URL) (blobstore.Blobstore, error) {
	dir, err := urlDir(u)
	if err != nil {
		return nil, fmt.Errorf("%w %q: %w", blobstore.ErrInvalidURL, u.Redacted(), err)
	}
	opts, err := urlOptions(u)
	if err != nil {
		return nil, fmt.Errorf("%w %q: %w", blobstore.ErrInvalidURL, u.Redacted(), err)
	}
	opts.Logger = blobstore.LoggerFromContext(ctx) // nil: says nothing
	return NewWithOptions(dir, opts)
}

// urlOptions parses the query parameters must_exist (a bool) and
// lock_timeout (a Go duration such as 5s, or "none").
func urlOptions(u *url.URL) (Options, error) {
	var o Options
	for name, vals := range u.Query() {
		if len(vals) != 1 {
			return Options{}, fmt.Errorf("parameter %s given %d times", name, len(vals))
		}
		v := vals[0]
		switch name {
		case "must_exist":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return Options{}, fmt.Errorf("parameter must_exist=%q: want true or false", v)
			}
			o.MustExist = b
		case "lock_timeout":
			if v == "none" {
				o.LockTimeout = -1
				continue
			}
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return Options{}, fmt.Errorf("parameter lock_timeout=%q: want a duration like 5s or 1m, or none", v)
			}
			o.LockTimeout = d
		default:
			return Options{}, fmt.Errorf("unknown parameter %q (file URLs take must_exist and lock_timeout)", name)
		}
	}
	return o, nil
}

func urlDir(u *url.URL) (string, error) {
	if u.Scheme != "" && !strings.EqualFold(u.Scheme, "file") {
		return "", fmt.Errorf("scheme %q is not file", u.Scheme)
	}
	if u.Fragment != "" {
		return "", fmt.Errorf("file URLs take no fragment")
	}
	if u.User != nil {
		return "", fmt.Errorf("file URLs take no user")
	}
	if u.Opaque != "" {
		// file:relative/dir
		return u.Opaque, nil
	}
	switch u.Host {
	case "", "localhost":
	default:
		return "", fmt.Errorf("host %q is not local (use file:///absolute/dir or file:relative/dir)", u.Host)
	}
	if u.Path == "" {
		return "", fmt.Errorf("no directory (use file:///absolute/dir or file:relative/dir)")
	}
	return u.Path, nil
}
