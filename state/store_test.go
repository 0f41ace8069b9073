package state_test

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tidemark-io/tidemark/state"
)

// testOptions keeps memory small: tests open many databases.
var testOptions = state.Options{MemTableSize: 256 << 10, CacheSize: 1 << 20}

func openStore(t *testing.T, dir string) *state.Store {
	t.Helper()
	s, err := state.Open(dir, testOptions)
	if err != nil {
		t.Fatalf("Open(%q): %v", dir, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func owner(t *testing.T, s *state.Store, id string) *state.Owner {
	t.Helper()
	o, err := s.Owner(id)
	if err != nil {
		t.Fatalf("Owner(%q): %v", id, err)
	}
	return o
}

// contents reads every pair of o into a map.
func contents(t *testing.T, o *state.Owner) map[string]string {
	t.Helper()
	m := map[string]string{}
	for kv, err := range o.Scan(nil) {
		if err != nil {
			t.Fatalf("Scan(%s): %v", o.ID(), err)
		}
		m[string(kv.Key)] = string(kv.Value)
	}
	return m
}

func TestValidateOwnerID(t *testing.T) {
	for _, tc := range []struct {
		id string
		ok bool
	}{
		{"op-1", true},
		{"Map_2.worker-03", true},
		{"...", true},
		{".hidden", true},
		{strings.Repeat("a", 255), true},
		{"", false},
		{".", false},
		{"..", false},
		{"a/b", false},
		{"../x", false},
		{`a\b`, false},
		{"a b", false},
		{"a\x00", false},
		{"é", false},
		{strings.Repeat("a", 256), false},
	} {
		err := state.ValidateOwnerID(tc.id)
		if tc.ok && err != nil {
			t.Errorf("ValidateOwnerID(%q) = %v, want nil", tc.id, err)
		}
		if !tc.ok && !errors.Is(err, state.ErrInvalidOwner) {
			t.Errorf("ValidateOwnerID(%q) = %v, want ErrInvalidOwner", tc.id, err)
		}
	}
}

func TestOwnerRejectsInvalidIDWithoutTouchingDisk(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "store")
	s := openStore(t, dir)
	for _, id := range []string{"", ".", "..", "../escape", "a/b", "/abs"} {
		if _, err := s.Owner(id); !errors.Is(err, state.ErrInvalidOwner) {
			t.Errorf("Owner(%q) = %v, want ErrInvalidOwner", id, err)
		}
	}
	for _, d := range []string{dir, root} {
		entries, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.Name() != "store" {
				t.Errorf("unexpected entry %q in %s", e.Name(), d)
			}
		}
	}
}

func TestOpenRejectsDirectoryWithInvalidOwnerName(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "bad name"), 0o755); err != nil {
		t.Fatal(err)
	}
	if s, err := state.Open(dir, testOptions); !errors.Is(err, state.ErrInvalidOwner) {
		if s != nil {
			_ = s.Close()
		}
		t.Fatalf("Open = %v, want ErrInvalidOwner", err)
	}
}

func TestGetSetDelete(t *testing.T) {
	o := owner(t, openStore(t, t.TempDir()), "op")
	if _, ok, err := o.Get([]byte("k")); err != nil || ok {
		t.Fatalf("Get(missing) = ok %v, err %v; want absent", ok, err)
	}
	if err := o.Set([]byte("k"), []byte("v1")); err != nil {
		t.Fatal(err)
	}
	if err := o.Set([]byte("k"), []byte("v2")); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := o.Get([]byte("k")); err != nil || !ok || string(v) != "v2" {
		t.Fatalf("Get = %q, %v, %v; want v2", v, ok, err)
	}
	if err := o.Set([]byte("empty"), nil); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := o.Get([]byte("empty")); err != nil || !ok || len(v) != 0 {
		t.Fatalf("Get(empty value) = %q, %v, %v; want present and empty", v, ok, err)
	}
	if err := o.Delete([]byte("k")); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := o.Get([]byte("k")); err != nil || ok {
		t.Fatalf("Get(deleted) = ok %v, err %v; want absent", ok, err)
	}
	if err := o.Delete([]byte("never-set")); err != nil {
		t.Fatalf("Delete(missing) = %v, want nil", err)
	}
}

func TestGetReturnsACopy(t *testing.T) {
	o := owner(t, openStore(t, t.TempDir()), "op")
	if err := o.Set([]byte("k"), []byte("value")); err != nil {
		t.Fatal(err)
	}
	v, _, _ := o.Get([]byte("k"))
	copy(v, "XXXXX")
	if v2, _, _ := o.Get([]byte("k")); string(v2) != "value" {
		t.Fatalf("after modifying a returned value, Get = %q", v2)
	}
}

func TestOwnersAreIsolated(t *testing.T) {
	s := openStore(t, t.TempDir())
	a, b := owner(t, s, "a"), owner(t, s, "b")
	if err := a.Set([]byte("k"), []byte("from-a")); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := b.Get([]byte("k")); ok {
		t.Fatal("owner b sees owner a's key")
	}
	if again := owner(t, s, "a"); again != a {
		t.Fatal("Owner returned a different handle for the same id")
	}
}

func TestApplyCommitsAllOrNothing(t *testing.T) {
	o := owner(t, openStore(t, t.TempDir()), "op")
	if err := o.Set([]byte("gone"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := o.Apply(func(b *state.Batch) error {
		if err := b.Set([]byte("a"), []byte("1")); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Apply = %v, want boom", err)
	}
	if got := contents(t, o); !maps.Equal(got, map[string]string{"gone": "x"}) {
		t.Fatalf("after failed Apply: %v", got)
	}
	err = o.Apply(func(b *state.Batch) error {
		if err := b.Set([]byte("a"), []byte("1")); err != nil {
			return err
		}
		if err := b.Set([]byte("b"), []byte("2")); err != nil {
			return err
		}
		if b.Len() != 2 {
			t.Errorf("Len = %d, want 2", b.Len())
		}
		return b.Delete([]byte("gone"))
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := contents(t, o); !maps.Equal(got, map[string]string{"a": "1", "b": "2"}) {
		t.Fatalf("after Apply: %v", got)
	}
}

func TestScanYieldsPrefixInKeyOrder(t *testing.T) {
	o := owner(t, openStore(t, t.TempDir()), "op")
	keys := []string{"a", "ab", "abc", "ab\xff", "ab\xff\xff", "ac", "b", "\xff", "\xff\xff"} // byte order
	for _, k := range keys {
		if err := o.Set([]byte(k), []byte("v"+k)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		{"", keys},
		{"ab", []string{"ab", "abc", "ab\xff", "ab\xff\xff"}},
		{"ab\xff", []string{"ab\xff", "ab\xff\xff"}},
		{"\xff", []string{"\xff", "\xff\xff"}},
		{"z", nil},
	} {
		var got []string
		for kv, err := range o.Scan([]byte(tc.prefix)) {
			if err != nil {
				t.Fatal(err)
			}
			if string(kv.Value) != "v"+string(kv.Key) {
				t.Errorf("value of %q = %q", kv.Key, kv.Value)
			}
			got = append(got, string(kv.Key))
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("Scan(%q) = %q, want %q", tc.prefix, got, tc.want)
		}
	}
}

func TestScanStopsWhenLoopBreaks(t *testing.T) {
	s := openStore(t, t.TempDir())
	o := owner(t, s, "op")
	for i := range 10 {
		if err := o.Set(fmt.Appendf(nil, "k%d", i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	for range o.Scan(nil) {
		n++
		if n == 3 {
			break
		}
	}
	if n != 3 {
		t.Fatalf("loop ran %d times", n)
	}
	// A leaked iterator makes Pebble's Close fail.
	if err := s.Close(); err != nil {
		t.Fatalf("Close after broken Scan: %v", err)
	}
}

func TestReopenKeepsOwnersAndData(t *testing.T) {
	dir := t.TempDir()
	s, err := state.Open(dir, testOptions)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"x", "y"} {
		o := owner(t, s, id)
		if err := o.Set([]byte("k"), []byte(id)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir)
	if got := s.Owners(); fmt.Sprint(got) != "[x y]" {
		t.Fatalf("Owners after reopen = %v", got)
	}
	for _, id := range []string{"x", "y"} {
		if v, ok, err := owner(t, s, id).Get([]byte("k")); err != nil || !ok || string(v) != id {
			t.Errorf("%s: Get = %q, %v, %v", id, v, ok, err)
		}
	}
}

func TestClosedStoreFailsWithErrClosed(t *testing.T) {
	s, err := state.Open(t.TempDir(), testOptions)
	if err != nil {
		t.Fatal(err)
	}
	o := owner(t, s, "op")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	checks := map[string]error{
		"Set":        o.Set([]byte("k"), nil),
		"Delete":     o.Delete([]byte("k")),
		"Apply":      o.Apply(func(*state.Batch) error { return nil }),
		"Flush":      o.Flush(),
		"Owner":      func() error { _, err := s.Owner("other"); return err }(),
		"Get":        func() error { _, _, err := o.Get([]byte("k")); return err }(),
		"Checkpoint": func() error { _, err := s.Checkpoint(t.Context(), t.TempDir()); return err }(),
		"Scan": func() error {
			for _, err := range o.Scan(nil) {
				return err
			}
			return nil
		}(),
	}
	for name, err := range checks {
		if !errors.Is(err, state.ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", name, err)
		}
	}
}

func TestConcurrentWritesToDifferentOwners(t *testing.T) {
	s := openStore(t, t.TempDir())
	const owners, keys = 4, 500
	var wg sync.WaitGroup
	errs := make(chan error, owners+1)
	for w := range owners {
		wg.Go(func() {
			o, err := s.Owner(fmt.Sprintf("w%d", w))
			if err != nil {
				errs <- err
				return
			}
			for i := range keys {
				k, v := state.GenerateKV(uint64(w), uint64(i), 64)
				if err := o.Set(k, v); err != nil {
					errs <- err
					return
				}
				if i%50 == 0 {
					if _, _, err := o.Get(k); err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	// A checkpoint racing with the writers must neither fail nor disturb
	// them.
	wg.Go(func() {
		if _, err := s.Checkpoint(t.Context(), filepath.Join(t.TempDir(), "ckpt")); err != nil {
			errs <- err
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for w := range owners {
		o := owner(t, s, fmt.Sprintf("w%d", w))
		got := contents(t, o)
		if len(got) != keys {
			t.Fatalf("w%d has %d keys, want %d", w, len(got), keys)
		}
		for i := range keys {
			k, v := state.GenerateKV(uint64(w), uint64(i), 64)
			if got[string(k)] != string(v) {
				t.Fatalf("w%d key %d: wrong value", w, i)
			}
		}
	}
}

func TestGenerateKVIsDeterministicAndDistinct(t *testing.T) {
	seen := map[string]bool{}
	for i := range uint64(10000) {
		k, v := state.GenerateKV(7, i, 33)
		k2, v2 := state.GenerateKV(7, i, 33)
		if !bytes.Equal(k, k2) || !bytes.Equal(v, v2) {
			t.Fatalf("GenerateKV(7, %d) not deterministic", i)
		}
		if len(k) != 16 || len(v) != 33 {
			t.Fatalf("GenerateKV(7, %d): key %d bytes, value %d bytes", i, len(k), len(v))
		}
		if seen[string(k)] {
			t.Fatalf("GenerateKV(7, %d): duplicate key %s", i, k)
		}
		seen[string(k)] = true
	}
	k1, v1 := state.GenerateKV(1, 0, 16)
	k2, v2 := state.GenerateKV(2, 0, 16)
	if bytes.Equal(k1, k2) || bytes.Equal(v1, v2) {
		t.Fatal("different seeds give the same pair")
	}
}
