package filestore_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/filestore"
)

func TestOpenURL(t *testing.T) {
	dir := t.TempDir()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		url     string
		wantDir string // "" means an error is expected
		wantErr string
	}{
		{url: "file://" + dir, wantDir: dir},
		{url: "file://localhost" + dir, wantDir: dir},
		{url: "FILE://" + dir, wantDir: dir},
		{url: "file://" + dir + "/with%20space", wantDir: dir + "/with space"},
		{url: "file:rel/dir", wantDir: filepath.Join(wd, "rel/dir")},
		{url: "file://otherhost/dir", wantErr: "not local"},
		{url: "file://./rel", wantErr: "not local"},
		{url: "file://" + dir + "?mode=x", wantErr: "unknown parameter"},
		{url: "file://" + dir + "?must_exist=true&lock_timeout=5s", wantDir: dir},
		{url: "file://" + dir + "?lock_timeout=none", wantDir: dir},
		{url: "file://" + dir + "?must_exist=perhaps", wantErr: "must_exist"},
		{url: "file://" + dir + "?lock_timeout=5", wantErr: "lock_timeout"},
		{url: "file://" + dir + "#frag", wantErr: "no fragment"},
		{url: "file://", wantErr: "no directory"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			bs, err := blobstore.Open(t.Context(), tc.url)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Open = %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			s, ok := bs.(*filestore.Store)
			if !ok {
				t.Fatalf("Open returned %T, want *filestore.Store", bs)
			}
			if s.Dir() != tc.wantDir {
				t.Fatalf("Dir() = %q, want %q", s.Dir(), tc.wantDir)
			}
		})
	}
}

func TestOpenURLRoundTrip(t *testing.T) {
	dir := t.TempDir()
	bs, err := blobstore.Open(t.Context(), "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	put(t, bs, "x/y", "via url")
	if got := get(t, newStore(t, dir), "x/y"); got != "via url" {
		t.Fatalf("a Store on the same directory reads %q", got)
	}
}
