package filestore

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/tidemark-io/tidemark/blobstore"
)

func init() {
	blobstore.Register("file", OpenURL)
}

// OpenURL opens the Store a file URL names. It is the opener registered
// for the "file" scheme; see the package documentation for the forms it
// accepts.
func OpenURL(_ context.Context, u *url.URL) (blobstore.Blobstore, error) {
	dir, err := urlDir(u)
	if err != nil {
		return nil, fmt.Errorf("filestore: open %q: %w", u.Redacted(), err)
	}
	return New(dir)
}

func urlDir(u *url.URL) (string, error) {
	if u.Scheme != "" && !strings.EqualFold(u.Scheme, "file") {
		return "", fmt.Errorf("scheme %q is not file", u.Scheme)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("file URLs take no query or fragment")
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
