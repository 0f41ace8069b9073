package blobstore_test

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
)

func TestValidateKeyRejects(t *testing.T) {
	for _, key := range blobstoretest.InvalidKeys {
		if err := blobstore.ValidateKey(key); !errors.Is(err, blobstore.ErrInvalidKey) {
			t.Errorf("ValidateKey(%.40q) = %v, want ErrInvalidKey", key, err)
		}
	}
}

func TestValidateKeyAccepts(t *testing.T) {
	for _, key := range []string{
		"a", "a/b", "checkpoints/000001/checkpoint.json", "...", "a/..b", "..a/b",
		"with space", "日本/語", "a.b", blobstoretest.LongestKey(blobstore.MaxKeyLen),
		`a\b`, `\x`, `x\`, `a\...\b`, `.x\x.`, ". x", "a/ /b", " ", "xl.meta.bkp", "a.xl.meta", "xl/meta", "__XLDIR__/a", "a__XLDIR__b", "\ufffd",
		strings.Repeat("s", blobstore.MaxSegmentLen) + "/x",
	} {
		if err := blobstore.ValidateKey(key); err != nil {
			t.Errorf("ValidateKey(%.40q) = %v, want nil", key, err)
		}
	}
}

func TestValidatePrefix(t *testing.T) {
	for _, tc := range []struct {
		prefix string
		ok     bool
	}{
		{"", true}, {"a", true}, {"a/", true}, {"a/b", true}, {"a/b/", true},
		{"a/.b", true}, {"a/..b", true}, {".x", true}, {"a/xl.meta", true}, {`a\`, true},
		// A partial last segment that is a dot segment: MinIO refuses
		// the listing, so every store does.
		{"a/.", false}, {"a/..", false}, {".", false}, {"..", false}, {`a\..`, false}, {"a/. ", false},
		{`a\..\b/`, false}, {"a/ .. /", false}, {"xl.meta/", false},
		{"../", false}, {"a/../", false}, {"/", false}, {"/a", false},
		{"a//", false}, {"a/./", false}, {"a\x00", false}, {"\xff", false},
		{strings.Repeat("p", blobstore.MaxKeyLen+1), false},
		{strings.Repeat("p", blobstore.MaxSegmentLen), true},
		{strings.Repeat("p", blobstore.MaxSegmentLen+1), false},
	} {
		err := blobstore.ValidatePrefix(tc.prefix)
		if tc.ok && err != nil {
			t.Errorf("ValidatePrefix(%q) = %v, want nil", tc.prefix, err)
		}
		if !tc.ok && !errors.Is(err, blobstore.ErrInvalidKey) {
			t.Errorf("ValidatePrefix(%q) = %v, want ErrInvalidKey", tc.prefix, err)
		}
	}
}

// FuzzValidateKey checks that every accepted key obeys the rules by a
// second, independent reading of them, so no key that could escape a
// filestore root or a prefix is ever accepted.
func FuzzValidateKey(f *testing.F) {
	for _, k := range blobstoretest.InvalidKeys {
		f.Add(k)
	}
	f.Add("a/b/c")
	f.Add("savepoints/label")
	f.Add(`a\b c/.x\..y`)
	f.Add("a/ . x/b")
	f.Fuzz(func(t *testing.T, key string) {
		if blobstore.ValidateKey(key) != nil {
			return
		}
		if key == "" || len(key) > blobstore.MaxKeyLen || !utf8.ValidString(key) {
			t.Fatalf("accepted %q: empty, too long or not UTF-8", key)
		}
		for _, seg := range strings.Split(key, "/") {
			if seg == "" || seg == "." || seg == ".." || len(seg) > blobstore.MaxSegmentLen {
				t.Fatalf("accepted %q with segment %q", key, seg)
			}
			if strings.ToLower(seg) == "xl.meta" || seg == ".tidemark-uploads" || strings.Contains(seg, "\uffff") || strings.Contains(seg, "\ufffe") {
				t.Fatalf("accepted %q with MinIO's reserved segment %q", key, seg)
			}
		}
		if strings.HasSuffix(key, "__XLDIR__") {
			t.Fatalf("accepted %q, which MinIO lists as a directory", key)
		}
		// A server that reads '\' as a separator and trims white space
		// (MinIO does both) must see no dot segment either.
		for _, part := range strings.FieldsFunc(strings.ReplaceAll(key, `\`, "/"), func(r rune) bool { return r == '/' }) {
			if p := strings.TrimSpace(part); p == "." || p == ".." {
				t.Fatalf("accepted %q, which has the dot segment %q on a server that splits on '\\' and trims spaces", key, part)
			}
		}
		for _, r := range key {
			if r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) {
				t.Fatalf("accepted %q with control character %U", key, r)
			}
		}
		if blobstore.ValidatePrefix(key) != nil {
			t.Fatalf("valid key %q is not a valid prefix", key)
		}
	})
}
