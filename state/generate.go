package state

import (
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
)

// GenerateKV returns the i-th key/value pair of a deterministic data set
// identified by seed, for tests and benchmarks that fill and later verify
// state. Keys are 16 lowercase hex digits; for a fixed seed distinct i give
// distinct keys (a bijection of i), spread uniformly over the key space so
// that writes in i order hit the whole LSM. Values are valueSize
// pseudo-random (incompressible) bytes that depend on seed and i.
func GenerateKV(seed, i uint64, valueSize int) (key, value []byte) {
	// i + mix(seed) is a bijection of i, and mix is a bijection: distinct
	// i can never collide.
	var kb [8]byte
	binary.BigEndian.PutUint64(kb[:], mix64(i+mix64(seed)))
	key = make([]byte, hex.EncodedLen(len(kb)))
	hex.Encode(key, kb[:])

	value = make([]byte, valueSize)
	r := rand.NewPCG(seed, i)
	for j := 0; j < valueSize; j += 8 {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], r.Uint64())
		copy(value[j:], w[:])
	}
	return key, value
}

// mix64 is the SplitMix64 finalizer, a bijection on uint64.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
