package encrypted_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
	"github.com/tidemark-io/tidemark/blobstore/encrypted"
	"github.com/tidemark-io/tidemark/blobstore/memstore"
	"github.com/tidemark-io/tidemark/filestore"
)

func testKey(t testing.TB, seed byte) encrypted.Key {
	t.Helper()
	k, err := encrypted.NewKey("", bytes.Repeat([]byte{seed}, encrypted.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func wrap(t testing.TB, bs blobstore.Blobstore, k encrypted.Key, pred func(string) bool) blobstore.Blobstore {
	t.Helper()
	d, err := encrypted.New(bs, k, encrypted.Options{Encrypt: pred})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func put(t testing.TB, bs blobstore.Blobstore, key string, b []byte) {
	t.Helper()
	if err := bs.Put(context.Background(), key, blobstoretest.Stream(b)); err != nil {
		t.Fatal(err)
	}
}

func readAll(bs blobstore.Blobstore, key string, off, n int64) ([]byte, error) {
	var rc io.ReadCloser
	var err error
	if off == 0 && n < 0 {
		rc, err = bs.Get(context.Background(), key)
	} else {
		rc, err = bs.GetRange(context.Background(), key, off, n)
	}
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// The decorator, encrypting every key and with the default predicate,
// passes the conformance suite on memstore and forwards every capability.
func TestDecorator(t *testing.T) {
	for name, pred := range map[string]func(string) bool{"All": encrypted.EncryptAll, "Default": nil} {
		t.Run(name, func(t *testing.T) {
			blobstoretest.RunDecorator(t, func(t *testing.T, bs blobstore.Blobstore) (blobstore.Blobstore, string) {
				return wrap(t, bs, testKey(t, 1), pred), ""
			})
		})
	}
}

// The conformance suite on filestore, every key encrypted.
func TestConformanceFilestore(t *testing.T) {
	blobstoretest.Run(t, func(t *testing.T) blobstore.Blobstore {
		fs, err := filestore.New(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return wrap(t, fs, testKey(t, 2), encrypted.EncryptAll)
	}, blobstoretest.Options{ListKeys: 300})
}

// Sizes around chunk boundaries round-trip through Get, Stat and List,
// and the stored object has the size CiphertextSize says.
func TestRoundTripSizes(t *testing.T) {
	base := memstore.New()
	bs := wrap(t, base, testKey(t, 3), encrypted.EncryptAll)
	const c = encrypted.ChunkSize
	for _, n := range []int64{0, 1, c - 1, c, c + 1, 2 * c, 3*c + 17} {
		key := fmt.Sprintf("o/%d", n)
		data := blobstoretest.Payload(uint64(n), n)
		put(t, bs, key, data)
		got, err := readAll(bs, key, 0, -1)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("size %d: Get = %d bytes, %v; want the %d bytes put", n, len(got), err, n)
		}
		info, err := bs.Stat(t.Context(), key)
		if err != nil || info.Size != n {
			t.Fatalf("size %d: Stat = %+v, %v", n, info, err)
		}
		raw, err := base.Stat(t.Context(), key)
		if err != nil || raw.Size != encrypted.CiphertextSize(n) {
			t.Fatalf("size %d: stored %d bytes, CiphertextSize says %d (%v)", n, raw.Size, encrypted.CiphertextSize(n), err)
		}
		if p, ok := encrypted.PlaintextSize(raw.Size); !ok || p != n {
			t.Fatalf("size %d: PlaintextSize(%d) = %d, %v", n, raw.Size, p, ok)
		}
		if info.ETag != raw.ETag {
			t.Fatalf("size %d: ETag %q, stored object's %q", n, info.ETag, raw.ETag)
		}
	}
	for info, err := range bs.List(t.Context(), "o/") {
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		fmt.Sscan(strings.TrimPrefix(info.Key, "o/"), &n)
		if info.Size != n {
			t.Fatalf("List: %s has size %d", info.Key, info.Size)
		}
	}
}

// Random ranges over several chunks return exactly the plaintext's bytes.
func TestGetRangeRandom(t *testing.T) {
	bs := wrap(t, memstore.New(), testKey(t, 4), encrypted.EncryptAll)
	const c = encrypted.ChunkSize
	for _, n := range []int64{3 * c, 3*c + 100} {
		data := blobstoretest.Payload(9, n)
		key := fmt.Sprintf("r/%d", n)
		put(t, bs, key, data)
		rng := rand.New(rand.NewPCG(1, uint64(n)))
		offs := []int64{0, c - 1, c, c + 1, 2 * c, n - 1, n, n + 5}
		for range 40 {
			offs = append(offs, rng.Int64N(n+10))
		}
		for _, off := range offs {
			for _, l := range []int64{-1, 0, 1, 2, c, c + 1, rng.Int64N(2 * c), 1 << 62} {
				got, err := readAll(bs, key, off, l)
				if err != nil {
					t.Fatalf("GetRange(%d, %d) of %d bytes: %v", off, l, n, err)
				}
				lo, hi := min(off, n), n
				if l >= 0 && l < n-lo {
					hi = lo + l
				}
				if !bytes.Equal(got, data[lo:hi]) {
					t.Fatalf("GetRange(%d, %d) of %d bytes: %d bytes, want data[%d:%d]", off, l, n, len(got), lo, hi)
				}
			}
		}
	}
}

// A reader configured with another key is refused, and the error names
// both key ids.
func TestWrongKey(t *testing.T) {
	base := memstore.New()
	a, b := testKey(t, 5), testKey(t, 6)
	put(t, wrap(t, base, a, encrypted.EncryptAll), "k", []byte("secret"))
	other := wrap(t, base, b, encrypted.EncryptAll)
	for _, r := range []struct {
		name     string
		off, len int64
	}{{"Get", 0, -1}, {"GetRange0", 0, 3}, {"GetRangeEmpty", 2, 0}} {
		_, err := readAll(other, "k", r.off, r.len)
		if !errors.Is(err, encrypted.ErrWrongKey) || !strings.Contains(err.Error(), a.ID) || !strings.Contains(err.Error(), b.ID) {
			t.Fatalf("%s with another key: %v; want ErrWrongKey naming %s and %s", r.name, err, a.ID, b.ID)
		}
	}
	// Same id, other material: the data key does not unwrap.
	same, err := encrypted.NewKey(a.ID, b.Material[:])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := readAll(wrap(t, base, same, encrypted.EncryptAll), "k", 0, -1); !errors.Is(err, encrypted.ErrCorrupt) {
		t.Fatalf("other material under the same id: %v, want ErrCorrupt", err)
	}
}

// A plain object where the store encrypts is refused, not trusted.
func TestPlainObjectRefused(t *testing.T) {
	base := memstore.New()
	put(t, base, "shared/x", []byte("plain"))
	put(t, base, "shared/empty", nil)
	bs := wrap(t, base, testKey(t, 7), nil)
	for _, key := range []string{"shared/x", "shared/empty"} {
		if _, err := readAll(bs, key, 0, -1); !errors.Is(err, encrypted.ErrNotEncrypted) {
			t.Fatalf("Get of plain %s: %v, want ErrNotEncrypted", key, err)
		}
		if _, err := readAll(bs, key, 1, 2); !errors.Is(err, encrypted.ErrNotEncrypted) {
			t.Fatalf("GetRange of plain %s: %v, want ErrNotEncrypted", key, err)
		}
	}
	// Outside the predicate, objects pass through both ways.
	put(t, bs, "_latest", []byte("pointer"))
	got, err := readAll(base, "_latest", 0, -1)
	if err != nil || string(got) != "pointer" {
		t.Fatalf("a plain key is stored as %q, %v", got, err)
	}
}

// Every flipped bit, every truncation, a swap of two chunks and a chunk
// spliced from another object fail with ErrCorrupt (or, in the key id,
// ErrWrongKey; in the magic, ErrNotEncrypted); no read returns wrong
// plaintext.
func TestTamper(t *testing.T) {
	ctx := t.Context()
	k := testKey(t, 8)
	const c = encrypted.ChunkSize
	data := blobstoretest.Payload(11, 2*c+10)
	base := memstore.New()
	bs := wrap(t, base, k, encrypted.EncryptAll)
	put(t, bs, "orig", data)
	put(t, bs, "other", data)
	raw, err := readAll(base, "orig", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, stored []byte) {
		t.Helper()
		put(t, base, "t", stored)
		reads := []struct{ off, n int64 }{{0, -1}, {0, 5}, {c + 3, 10}, {2 * c, -1}, {c - 1, c + 2}}
		for _, r := range reads {
			got, err := readAll(bs, "t", r.off, r.n)
			if err == nil {
				lo, hi := min(r.off, int64(len(data))), int64(len(data))
				if r.n >= 0 {
					hi = min(lo+r.n, hi)
				}
				if !bytes.Equal(got, data[lo:hi]) {
					t.Fatalf("%s: read (%d, %d) returned wrong plaintext", what, r.off, r.n)
				}
				continue // this range does not cover the damage
			}
			if !errors.Is(err, encrypted.ErrCorrupt) && !errors.Is(err, encrypted.ErrWrongKey) && !errors.Is(err, encrypted.ErrNotEncrypted) {
				t.Fatalf("%s: read (%d, %d): %v, want ErrCorrupt", what, r.off, r.n, err)
			}
		}
		// A whole read always covers the damage.
		if _, err := readAll(bs, "t", 0, -1); err == nil {
			t.Fatalf("%s: Get succeeded", what)
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	positions := []int{0, 7, 10, 45, 60, encrypted.HeaderSize - 1, encrypted.HeaderSize, encrypted.HeaderSize + c + 16, len(raw) - 1}
	for range 20 {
		positions = append(positions, rng.IntN(len(raw)))
	}
	for _, p := range positions {
		b := bytes.Clone(raw)
		b[p] ^= 1 << rng.IntN(8)
		check(fmt.Sprintf("bit flipped at %d", p), b)
	}
	sealed := c + 16
	h := encrypted.HeaderSize
	for _, n := range []int{0, 3, h - 1, h, h + 1, h + sealed, h + 2*sealed, len(raw) - 1} {
		check(fmt.Sprintf("truncated to %d", n), raw[:n])
	}
	swapped := bytes.Clone(raw)
	copy(swapped[h:], raw[h+sealed:h+2*sealed])
	copy(swapped[h+sealed:], raw[h:h+sealed])
	check("chunks 0 and 1 swapped", swapped)
	otherRaw, err := readAll(base, "other", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	spliced := bytes.Clone(raw)
	copy(spliced[h+sealed:], otherRaw[h+sealed:h+2*sealed])
	check("chunk 1 from another object", spliced)
	check("a chunk appended", append(bytes.Clone(raw), raw[h:h+sealed]...))
	if _, err := base.Stat(ctx, "t"); err != nil {
		t.Fatal(err)
	}
}

// Key loading: raw or base64 files, the environment, wrong lengths.
func TestLoadKey(t *testing.T) {
	dir := t.TempDir()
	material := bytes.Repeat([]byte{9}, encrypted.KeySize)
	want := encrypted.DefaultID(material)
	write := func(name string, b []byte) string {
		p := dir + "/" + name
		if err := writeFile(p, b); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for name, b := range map[string][]byte{
		"raw":    material,
		"base64": []byte(b64(material) + "\n"),
	} {
		k, err := encrypted.LoadKeyFile(write(name, b))
		if err != nil || k.ID != want || !bytes.Equal(k.Material[:], material) {
			t.Fatalf("%s key file: %+v, %v", name, k.ID, err)
		}
	}
	for name, b := range map[string][]byte{
		"short":     material[:31],
		"long64":    []byte(b64(append(material, 1))),
		"notbase64": []byte("%%%%"),
		"emptyfile": nil,
	} {
		if _, err := encrypted.LoadKeyFile(write(name, b)); !errors.Is(err, encrypted.ErrInvalidKey) {
			t.Fatalf("%s key file: %v, want ErrInvalidKey", name, err)
		}
	}
	if _, err := encrypted.LoadKeyFile(dir + "/missing"); !errors.Is(err, encrypted.ErrInvalidKey) {
		t.Fatalf("missing key file: %v, want ErrInvalidKey", err)
	}
	t.Setenv("TIDEMARK_TEST_KEY", b64(material))
	k, ok, err := encrypted.LoadKeyEnv("TIDEMARK_TEST_KEY")
	if err != nil || !ok || k.ID != want {
		t.Fatalf("LoadKeyEnv: %v %v %v", k.ID, ok, err)
	}
	t.Setenv("TIDEMARK_TEST_KEY", b64(material[:16]))
	if _, _, err := encrypted.LoadKeyEnv("TIDEMARK_TEST_KEY"); !errors.Is(err, encrypted.ErrInvalidKey) {
		t.Fatalf("LoadKeyEnv of 16 bytes: %v, want ErrInvalidKey", err)
	}
	t.Setenv("TIDEMARK_TEST_KEY", "")
	if _, ok, err := encrypted.LoadKeyEnv("TIDEMARK_TEST_KEY"); ok || err != nil {
		t.Fatalf("LoadKeyEnv of an empty variable: %v %v", ok, err)
	}
	if _, err := encrypted.NewKey("has space", material); !errors.Is(err, encrypted.ErrInvalidKey) {
		t.Fatalf("a key id with a space: %v", err)
	}
}
