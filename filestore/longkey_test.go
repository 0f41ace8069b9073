package filestore_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/tidemark-io/tidemark/blobstore"
)

func TestLongSegmentsRoundTrip(t *testing.T) {
	s := newStore(t, t.TempDir())
	keys := []string{
		strings.Repeat("k", blobstore.MaxKeyLen),
		strings.Repeat("a", 199),
		strings.Repeat("a", 200),
		strings.Repeat("a", 400),
		strings.Repeat("a", 401) + "/x",
		"a" + strings.Repeat("é", 150) + "/y", // 301 bytes, split inside a rune
	}
	for i, k := range keys {
		put(t, s, k, string(rune('0'+i)))
	}
	for i, k := range keys {
		if got := get(t, s, k); got != string(rune('0'+i)) {
			t.Fatalf("Get(%d-byte key) = %q", len(k), got)
		}
	}
	want := slices.Sorted(slices.Values(keys))
	if got := list(t, s, ""); !slices.Equal(got, want) {
		t.Fatalf("List = %d keys, want %d in order", len(got), len(want))
	}
	for _, k := range keys {
		if err := s.Delete(t.Context(), k); err != nil {
			t.Fatal(err)
		}
	}
	if got := tree(t, s.Dir()); len(got) != 0 {
		t.Fatalf("after deleting every key the tree holds %q", got)
	}
}

// TestListOrderProperty checks List against sorting on random key sets
// built to stress the on-disk encoding: bytes on both sides of '/',
// segments of lengths around the 200-byte piece size, and prefixes that
// end inside a long segment.
func TestListOrderProperty(t *testing.T) {
	base := t.TempDir()
	rapid.Check(t, func(rt *rapid.T) {
		alphabet := rapid.SampledFrom([]string{"-", ".", "0", "a", "é"})
		segment := rapid.Custom(func(rt *rapid.T) string {
			unit := alphabet.Draw(rt, "unit")
			n := rapid.SampledFrom([]int{1, 2, 199, 200, 201, 399, 400, 401}).Draw(rt, "len")
			seg := strings.Repeat(unit, n)[:n] // a cut "é" is still one valid or invalid byte run
			tail := rapid.StringOfN(rapid.SampledFrom([]rune("-.0aé")), 0, 3, -1).Draw(rt, "tail")
			return seg[:max(len(seg)-len(tail), 0)] + tail
		})
		key := rapid.Custom(func(rt *rapid.T) string {
			return strings.Join(rapid.SliceOfN(segment, 1, 3).Draw(rt, "segments"), "/")
		})
		candidates := rapid.SliceOfN(key, 1, 8).Draw(rt, "keys")
		var keys []string
		for _, k := range candidates {
			if blobstore.ValidateKey(k) != nil || slices.Contains(keys, k) || conflicts(keys, k) {
				continue
			}
			keys = append(keys, k)
		}
		dir, err := os.MkdirTemp(base, "case")
		if err != nil {
			rt.Fatal(err)
		}
		defer os.RemoveAll(dir)
		s := newStore(t, dir)
		for _, k := range keys {
			if err := s.Put(t.Context(), k, strings.NewReader(k)); err != nil {
				rt.Fatalf("Put(%q): %v", k, err)
			}
		}
		prefixes := []string{""}
		for _, k := range keys {
			cut := rapid.IntRange(0, len(k)).Draw(rt, "cut")
			if p := k[:cut]; blobstore.ValidatePrefix(p) == nil {
				prefixes = append(prefixes, p)
			}
		}
		for _, p := range prefixes {
			var want []string
			for _, k := range keys {
				if strings.HasPrefix(k, p) {
					want = append(want, k)
				}
			}
			slices.Sort(want)
			var got []string
			for info, err := range s.List(t.Context(), p) {
				if err != nil {
					rt.Fatalf("List(%q): %v", p, err)
				}
				got = append(got, info.Key)
			}
			if !slices.Equal(got, want) {
				rt.Fatalf("List(%q) = %q, want %q", p, got, want)
			}
		}
	})
}

// conflicts reports whether k and a key in keys would need the same path
// to be both a file and a directory.
func conflicts(keys []string, k string) bool {
	for _, o := range keys {
		if strings.HasPrefix(k, o+"/") || strings.HasPrefix(o, k+"/") {
			return true
		}
	}
	return false
}
