package s3store

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// TestCRC32Combine checks the combination against the CRC of the
// concatenation, for empty, short and long pieces split anywhere.
func TestCRC32Combine(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	cuts := []int{0, 1, 7, 4096, 65537, len(data) - 1, len(data)}
	for range 20 {
		cuts = append(cuts, rng.IntN(len(data)+1))
	}
	want := crc32.Checksum(data, castagnoli)
	for _, c := range cuts {
		a, b := data[:c], data[c:]
		got := crc32Combine(crc32.Checksum(a, castagnoli), crc32.Checksum(b, castagnoli), int64(len(b)))
		if got != want {
			t.Fatalf("cut at %d: combined %08x, want %08x", c, got, want)
		}
	}
	// Many pieces, folded in order, as an upload of parts does.
	var crc uint32
	for off := 0; off < len(data); {
		n := min(len(data)-off, 1+rng.IntN(100000))
		crc = crc32Combine(crc, crc32.Checksum(data[off:off+n], castagnoli), int64(n))
		off += n
	}
	if crc != want {
		t.Fatalf("folded: %08x, want %08x", crc, want)
	}
}

func TestParseCRC32C(t *testing.T) {
	crc := crc32.Checksum([]byte("tidemark"), castagnoli)
	if got, ok := parseCRC32C(crc32cBase64(crc)); !ok || got != crc {
		t.Fatalf("round trip: %08x %v, want %08x", got, ok, crc)
	}
	for _, bad := range []string{"", "AAAA", "abcd-3", "!!!!!!!!"} {
		if _, ok := parseCRC32C(&bad); ok {
			t.Errorf("parseCRC32C(%q) accepted", bad)
		}
	}
}
