package blobstorage

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/internal/localfs"
)

// payload returns n pseudo-random bytes, different for each seed.
func payload(seed uint64, n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, 1))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// TestRestoreIsByteExactAtEverySizeAroundTheBlocksAndTheBuffer restores
// files whose sizes straddle the direct-write block (4 KiB) and buffer
// (1 MiB) boundaries, with direct writes and with BufferedRestore: every
// file comes back byte for byte, with its exact size (a last partial
// block written buffered, nothing padded).
func TestRestoreIsByteExactAtEverySizeAroundTheBlocksAndTheBuffer(t *testing.T) {
	sizes := []int{0, 1, directAlign - 1, directAlign, directAlign + 1,
		directBufSize - 1, directBufSize, directBufSize + 1, 3*directBufSize + directAlign + 5}
	bs := newMem()
	w := newWriter(t, bs, Options{})
	files := stateFiles{"w0": {}}
	for i, n := range sizes {
		files["w0"][fmt.Sprintf("%06d.sst", i+1)] = string(payload(uint64(i), n))
	}
	id := checkpoint.NewID(1)
	saveState(t, w, id, checkpoint.StatusCompleted, files)
	for _, buffered := range []bool{false, true} {
		t.Run(fmt.Sprintf("buffered=%v", buffered), func(t *testing.T) {
			fresh := New(bs, t.TempDir(), Options{BufferedRestore: buffered})
			if err := fresh.Restore(ctx, id); err != nil {
				t.Fatal(err)
			}
			for i, n := range sizes {
				p := filepath.Join(fresh.StateDir(id), "w0", fmt.Sprintf("%06d.sst", i+1))
				got, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != n || !bytes.Equal(got, payload(uint64(i), n)) {
					t.Errorf("file of %d bytes restored as %d bytes, content equal: %v", n, len(got), bytes.Equal(got, payload(uint64(i), n)))
				}
			}
		})
	}
}

// TestCreateRestoredWritesDirectlyWhereTheFilesystemAllows checks that
// the fast path is the one taken: on Linux, in a temporary directory
// whose filesystem takes O_DIRECT, a restored file is opened direct, and
// with direct false it is not.
func TestCreateRestoredWritesDirectlyWhereTheFilesystemAllows(t *testing.T) {
	dir := t.TempDir()
	w, fh, err := createRestored(localfs.OS{}, filepath.Join(dir, "a"), true)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	probe, perr := openDirect(filepath.Join(dir, "probe"))
	if perr == nil {
		probe.Close()
	}
	if _, ok := w.(*directFile); ok != (perr == nil) {
		t.Fatalf("createRestored direct: %v; the filesystem takes O_DIRECT: %v (%v)", ok, perr == nil, perr)
	}
	w2, fh2, err := createRestored(localfs.OS{}, filepath.Join(dir, "b"), false)
	if err != nil {
		t.Fatal(err)
	}
	defer fh2.Close()
	if _, ok := w2.(*directFile); ok {
		t.Fatal("createRestored with direct false returned a direct file")
	}
	if _, _, err := createRestored(localfs.OS{}, filepath.Join(dir, "a"), true); !os.IsExist(err) {
		t.Fatalf("createRestored of an existing file: %v, want it to exist already", err)
	}
}

// TestDirectFileFallsBackToBufferedWhenADirectWriteIsRefused makes the
// filesystem refuse a direct write (memory that is not block-aligned, as
// a filesystem wanting a larger alignment would) and checks that the
// bytes are written buffered instead, all of them, in order.
func TestDirectFileFallsBackToBufferedWhenADirectWriteIsRefused(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	fh, err := openDirect(p)
	if err != nil {
		t.Skipf("no direct I/O here (%v): nothing to fall back from", err)
	}
	defer fh.Close()
	bp := directBufs.Get().(*[]byte)
	defer directBufs.Put(bp)
	misaligned := (*bp)[1 : 1+2*directAlign]
	copy(misaligned, payload(7, len(misaligned)))
	if _, err := fh.WriteAt(misaligned, 0); err == nil {
		t.Skip("this filesystem takes misaligned direct writes: the refusal cannot be provoked")
	}
	d := &directFile{f: fh, direct: true}
	hp := directBufs.Get().(*[]byte)
	defer directBufs.Put(hp)
	head := payload(8, directAlign)
	copy(*hp, head)
	if err := d.write((*hp)[:directAlign]); err != nil {
		t.Fatal(err)
	}
	if !d.direct {
		t.Fatal("an aligned direct write turned direct I/O off")
	}
	if err := d.write(misaligned); err != nil {
		t.Fatalf("refused direct write did not fall back: %v", err)
	}
	if d.direct {
		t.Error("still direct after a refused write")
	}
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if want := append(head, payload(7, len(misaligned))...); !bytes.Equal(got, want) {
		t.Fatalf("file holds %d bytes, want %d, equal: %v", len(got), len(want), bytes.Equal(got, want))
	}
}

// verifiedGets records, for each key read with Get, whether its context
// carried blobstore.WithContentVerified.
type verifiedGets struct {
	blobstore.Blobstore
	mu   sync.Mutex
	seen map[string]bool
}

func (v *verifiedGets) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	v.mu.Lock()
	v.seen[key] = blobstore.ContentVerified(ctx)
	v.mu.Unlock()
	return v.Blobstore.Get(ctx, key)
}

// TestRestoreMarksOnlyTheReadsItVerifiesByDigest checks that Restore
// lets the store skip its transport checksum for the state files, whose
// SHA-256 it checks, and for nothing else (the record has no digest).
func TestRestoreMarksOnlyTheReadsItVerifiesByDigest(t *testing.T) {
	bs := newMem()
	w := newWriter(t, bs, Options{})
	id := checkpoint.NewID(1)
	saveState(t, w, id, checkpoint.StatusCompleted, c1Files)
	v := &verifiedGets{Blobstore: bs, seen: map[string]bool{}}
	if err := New(v, t.TempDir(), Options{}).Restore(ctx, id); err != nil {
		t.Fatal(err)
	}
	files := 0
	for key, marked := range v.seen {
		isFile := KeyClass(key) == "shared" || KeyClass(key) == "private"
		if isFile {
			files++
		}
		if marked != isFile {
			t.Errorf("Get %q (class %s): content-verified mark %v", key, KeyClass(key), marked)
		}
	}
	if files == 0 {
		t.Fatalf("no state file read: %v", v.seen)
	}
}
