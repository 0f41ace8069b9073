package archive

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestManifestEncodesAndDecodesOnItsOwn(t *testing.T) {
	m := &Manifest{Version: FormatVersion, Record: []byte(`{"id":"x"}`), Files: []File{
		fileOf("state/op1/000001.sst", []byte("alpha")),
		fileOf("remote/op1/e1-a/000002.sst", nil),
	}}
	b, err := EncodeManifest(m, Limits{})
	mustNoErr(t, err)
	got, err := DecodeManifest(bytes.NewReader(append(b, '\n')), Limits{})
	mustNoErr(t, err)
	if len(got.Files) != 2 || got.Files[0] != m.Files[0] || got.Files[1] != m.Files[1] || string(got.Record) != `{"id":"x"}` {
		t.Fatalf("decoded %+v, want %+v", got, m)
	}
}

func TestDecodeManifestRefuses(t *testing.T) {
	good, err := EncodeManifest(&Manifest{Version: FormatVersion, Record: []byte(`{}`), Files: []File{fileOf("state/o/a", []byte("a"))}}, Limits{})
	mustNoErr(t, err)
	two, err := EncodeManifest(&Manifest{Version: FormatVersion, Record: []byte(`{}`), Files: []File{fileOf("state/o/a", []byte("a")), fileOf("state/o/b", nil)}}, Limits{})
	mustNoErr(t, err)
	for name, tc := range map[string]struct {
		in  string
		lim Limits
	}{
		"trailing data":  {in: string(good) + "{}"},
		"two objects":    {in: string(good) + string(good)},
		"over the limit": {in: string(good), lim: Limits{MaxManifestBytes: int64(len(good) - 1)}},
		"too many files": {in: string(two), lim: Limits{MaxFiles: 1}},
		"bad path":       {in: strings.Replace(string(good), "state/o/a", "state/../a", 1)},
		"truncated":      {in: string(good[:len(good)-2])},
		"empty":          {in: ""},
		"not json":       {in: "MANIFEST.json\x00\x00"},
	} {
		_, err := DecodeManifest(strings.NewReader(tc.in), tc.lim)
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
		if name == "over the limit" && !errors.Is(err, ErrTooLarge) {
			t.Errorf("%s: %v, want ErrTooLarge", name, err)
		}
	}
	if _, err := DecodeManifest(bytes.NewReader(good), Limits{MaxManifestBytes: int64(len(good))}); err != nil {
		t.Errorf("a manifest of exactly MaxManifestBytes: %v", err)
	}
}

func TestEncodeManifestRefusesWhatReadersRefuse(t *testing.T) {
	m := &Manifest{Version: FormatVersion, Record: []byte(`{}`), Files: []File{fileOf("state/o/a", []byte("a")), fileOf("state/o/a", []byte("a"))}}
	if _, err := EncodeManifest(m, Limits{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("duplicate paths: %v, want ErrCorrupt", err)
	}
}
