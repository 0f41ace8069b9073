package savepoint_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/archive"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/memstore"
	"github.com/tidemark-io/tidemark/filestore"
	"github.com/tidemark-io/tidemark/savepoint"
)

// forEachStore runs f on a fresh memstore and a fresh filestore.
func forEachStore(t *testing.T, f func(t *testing.T, bs blobstore.Blobstore)) {
	t.Run("memstore", func(t *testing.T) { f(t, memstore.New()) })
	t.Run("filestore", func(t *testing.T) {
		fs, err := filestore.New(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		f(t, fs)
	})
}

// files is a savepoint's content by archive path.
type files map[string][]byte

// state returns n files of size bytes each, distinct, under two owners.
func state(n, size int, seed string) files {
	fs := files{}
	for i := range n {
		pat := []byte(fmt.Sprintf("%s-%06d|", seed, i))
		b := bytes.Repeat(pat, size/len(pat)+1)[:size]
		fs[fmt.Sprintf("state/op-%d/%06d.sst", i%2, i)] = b
	}
	return fs
}

func (f files) clone() files { return maps.Clone(f) }

func (f files) manifest() *archive.Manifest {
	m := &archive.Manifest{Version: archive.FormatVersion, Record: []byte(`{"id":"ckpt-1"}`)}
	for _, p := range slices.Sorted(maps.Keys(f)) {
		sum := sha256.Sum256(f[p])
		m.Files = append(m.Files, archive.File{Path: p, Size: int64(len(f[p])), SHA256: hex.EncodeToString(sum[:])})
	}
	return m
}

func (f files) open(_ context.Context, p string) (io.ReadCloser, error) {
	b, ok := f[p]
	if !ok {
		return nil, fs.ErrNotExist
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

func (f files) total() int64 {
	var n int64
	for _, b := range f {
		n += int64(len(b))
	}
	return n
}

// archiveOf returns the archive of f.
func archiveOf(t *testing.T, f files) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := archive.Write(t.Context(), &b, f.manifest(), f.open, archive.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// readBack returns the files of savepoint label of bs, read through its
// archive and verified.
func readBack(t *testing.T, bs blobstore.Blobstore, label string) files {
	t.Helper()
	sp, err := savepoint.Open(t.Context(), bs, label, savepoint.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	rc := sp.Archive(t.Context())
	defer rc.Close()
	got := files{}
	_, err = archive.Read(t.Context(), rc, archive.Limits{}, func(f archive.File, r io.Reader) error {
		b, err := io.ReadAll(r)
		got[f.Path] = b
		return err
	})
	if err != nil {
		t.Fatalf("savepoint %s: %v", label, err)
	}
	return got
}

func sameFiles(t *testing.T, got, want files) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d files, want %d", len(got), len(want))
	}
	for p, b := range want {
		if !bytes.Equal(got[p], b) {
			t.Fatalf("%s differs", p)
		}
	}
}

// counter counts the bytes written under a prefix of an observed store.
type counter struct {
	prefix string
	mu     sync.Mutex
	bytes  int64
	puts   int
}

func (c *counter) Transferred(op blobstore.Op, key string, n int) {
	if (op == blobstore.OpPut || op == blobstore.OpPutIfAbsent) && strings.HasPrefix(key, c.prefix) {
		c.mu.Lock()
		c.bytes += int64(n)
		c.mu.Unlock()
	}
}

func (c *counter) Done(op blobstore.Op, key string, _ int64, _ time.Duration, err error) {
	if (op == blobstore.OpPut || op == blobstore.OpPutIfAbsent) && strings.HasPrefix(key, c.prefix) && err == nil {
		c.mu.Lock()
		c.puts++
		c.mu.Unlock()
	}
}

func (c *counter) sent() (int64, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, n := c.bytes, c.puts
	c.bytes, c.puts = 0, 0
	return b, n
}

// contentKeys returns the content keys of bs.
func contentKeys(t *testing.T, bs blobstore.Blobstore) []string {
	t.Helper()
	var keys []string
	for o, err := range bs.List(t.Context(), savepoint.ContentPrefix) {
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, o.Key)
	}
	return keys
}

func mustPut(t *testing.T, bs blobstore.Blobstore, label string, f files) savepoint.Stats {
	t.Helper()
	st, err := savepoint.Put(t.Context(), bs, label, f.manifest(), f.open, savepoint.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// noGrace are options for deletes that remove unreferenced content at
// once.
var noGrace = savepoint.Options{Grace: -1}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
