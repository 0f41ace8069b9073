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
		{"a/.", true}, {"a/..", true}, {".", true}, {"..", true},
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
