package savepoint_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/tidemark-io/tidemark/archive"
	"github.com/tidemark-io/tidemark/blobstore/memstore"
	"github.com/tidemark-io/tidemark/savepoint"
)

// manifestObject returns the manifest object Put writes for f.
func manifestObject(t testing.TB, f files) []byte {
	bs := memstore.New()
	if _, err := savepoint.Put(t.Context(), bs, "x", f.manifest(), f.open, savepoint.Options{}); err != nil {
		t.Fatal(err)
	}
	rc, err := bs.Get(t.Context(), savepoint.LabelKey("x"))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var b bytes.Buffer
	b.ReadFrom(rc)
	return b.Bytes()
}

func TestHostileManifestObjectsAreRefused(t *testing.T) {
	good := manifestObject(t, state(2, 10, "a"))
	hdr, body, _ := bytes.Cut(good, []byte("\n"))
	for name, tc := range map[string]struct {
		obj  string
		lim  archive.Limits
		want error
	}{
		"counts that disagree": {obj: strings.Replace(string(good), `"files":2`, `"files":3`, 1)},
		"bytes that disagree":  {obj: strings.Replace(string(good), `"bytes":20`, `"bytes":21`, 1)},
		"unknown version":      {obj: strings.Replace(string(good), `"version":1,"files"`, `"version":9,"files"`, 1)},
		"header only":          {obj: string(hdr)},
		"header line too long": {obj: string(hdr[:len(hdr)-1]) + `,"x":"` + strings.Repeat("a", 5000) + `"}` + "\n" + string(body)},
		"trailing data":        {obj: string(good) + "{}"},
		"path out of state":    {obj: strings.Replace(string(good), "state/op-0/", "state/../..", 1)},
		"manifest too large":   {obj: string(good), lim: archive.Limits{MaxManifestBytes: 100}, want: archive.ErrTooLarge},
		"too many files":       {obj: string(good), lim: archive.Limits{MaxFiles: 1}, want: archive.ErrTooLarge},
		"not json":             {obj: `{"format":"tidemark-savepoint-manifest"` + "\x00\x01"},
	} {
		bs := memstore.New()
		if err := bs.Put(t.Context(), savepoint.LabelKey("x"), strings.NewReader(tc.obj)); err != nil {
			t.Fatal(err)
		}
		_, err := savepoint.Open(t.Context(), bs, "x", savepoint.Options{Limits: tc.lim})
		want := tc.want
		if want == nil {
			want = archive.ErrCorrupt
		}
		if !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", name, err, want)
		}
	}
}

func FuzzOpen(f *testing.F) {
	f.Add(manifestObject(f, state(2, 10, "a")))
	f.Add([]byte(`{"format":"tidemark-savepoint-manifest","version":1,"files":0,"bytes":0}` + "\n" + `{"version":1,"record":{},"files":[]}`))
	f.Fuzz(func(t *testing.T, obj []byte) {
		bs := memstore.New()
		if err := bs.Put(t.Context(), savepoint.LabelKey("x"), bytes.NewReader(obj)); err != nil {
			t.Fatal(err)
		}
		sp, err := savepoint.Open(t.Context(), bs, "x", savepoint.Options{Limits: archive.Limits{MaxManifestBytes: 1 << 20}})
		if err != nil {
			return
		}
		defer sp.Close()
		if sp.Format == savepoint.FormatManifest {
			if _, err := archive.EncodeManifest(sp.Manifest, archive.Limits{}); err != nil {
				t.Fatalf("accepted a manifest the writer refuses: %v", err)
			}
		}
	})
}
