package encrypted_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
	"github.com/tidemark-io/tidemark/blobstore/encrypted"
	"github.com/tidemark-io/tidemark/blobstore/memstore"
)

// Detect changes nothing on a plain store: the conformance suite, every
// key selected, and the capabilities.
func TestDetectDecorator(t *testing.T) {
	blobstoretest.RunDecorator(t, func(t *testing.T, bs blobstore.Blobstore) (blobstore.Blobstore, string) {
		return encrypted.Detect(bs, encrypted.Options{Encrypt: encrypted.EncryptAll}), ""
	})
}

// Without a key, a read of an encrypted object from its start fails
// naming the key id; plain objects and unselected keys read as stored.
func TestDetectNamesTheKeyID(t *testing.T) {
	base := memstore.New()
	k := testKey(t, 41)
	put(t, wrap(t, base, k, nil), "shared/o/1.sst", []byte("secret"))
	put(t, base, "shared/o/2.sst", []byte("plain"))
	d := encrypted.Detect(base, encrypted.Options{})
	for _, r := range []struct{ off, n int64 }{{0, -1}, {0, 100}} {
		_, err := readAll(d, "shared/o/1.sst", r.off, r.n)
		if !errors.Is(err, encrypted.ErrNoKey) || !strings.Contains(err.Error(), k.ID) {
			t.Fatalf("read (%d, %d) without the key: %v; want ErrNoKey naming %s", r.off, r.n, err, k.ID)
		}
	}
	// A range too short to hold the key id is refused all the same.
	if _, err := readAll(d, "shared/o/1.sst", 0, 10); !errors.Is(err, encrypted.ErrNoKey) {
		t.Fatalf("a 10-byte range without the key: %v, want ErrNoKey", err)
	}
	got, err := readAll(d, "shared/o/2.sst", 0, -1)
	if err != nil || string(got) != "plain" {
		t.Fatalf("a plain object through Detect: %q, %v", got, err)
	}
	got, err = readAll(d, "shared/o/2.sst", 1, 3)
	if err != nil || string(got) != "lai" {
		t.Fatalf("a range of a plain object through Detect: %q, %v", got, err)
	}
}
