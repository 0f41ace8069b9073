package encrypted_test

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
	"github.com/tidemark-io/tidemark/blobstore/encrypted"
	"github.com/tidemark-io/tidemark/blobstore/memstore"
)

const benchSize = 16 << 20

// benchStores are memstore plain and through the decorator: the
// difference is the cost of encryption.
func benchStores(b *testing.B) map[string]blobstore.Blobstore {
	return map[string]blobstore.Blobstore{
		"plain":     memstore.New(),
		"encrypted": wrap(b, memstore.New(), testKey(b, 1), encrypted.EncryptAll),
	}
}

// BenchmarkPut reports MB/s of Put of a 16 MiB object.
func BenchmarkPut(b *testing.B) {
	data := blobstoretest.Payload(1, benchSize)
	for name, bs := range benchStores(b) {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(benchSize)
			for b.Loop() {
				if err := bs.Put(context.Background(), "k", bytes.NewReader(data)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGet reports MB/s of Get of a 16 MiB object.
func BenchmarkGet(b *testing.B) {
	data := blobstoretest.Payload(1, benchSize)
	for name, bs := range benchStores(b) {
		put(b, bs, "k", data)
		b.Run(name, func(b *testing.B) {
			b.SetBytes(benchSize)
			for b.Loop() {
				rc, err := bs.Get(context.Background(), "k")
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.Copy(io.Discard, rc); err != nil {
					b.Fatal(err)
				}
				rc.Close()
			}
		})
	}
}

// BenchmarkGetRange4K reports the cost of a 4 KiB range read in the
// middle of an object, as Pebble reads a block of a remote table: one
// 64 KiB chunk is authenticated for it.
func BenchmarkGetRange4K(b *testing.B) {
	data := blobstoretest.Payload(1, benchSize)
	for name, bs := range benchStores(b) {
		put(b, bs, "k", data)
		b.Run(name, func(b *testing.B) {
			b.SetBytes(4 << 10)
			for b.Loop() {
				rc, err := bs.GetRange(context.Background(), "k", 5<<20+100, 4<<10)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.Copy(io.Discard, rc); err != nil {
					b.Fatal(err)
				}
				rc.Close()
			}
		})
	}
}
