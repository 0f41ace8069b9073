package remotestore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/objstorage/remote"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
	"github.com/tidemark-io/tidemark/blobstore/memstore"
	"github.com/tidemark-io/tidemark/state/remotestore"
)

func newStorage(t *testing.T, bs blobstore.Blobstore, prefix string) *remotestore.Storage {
	t.Helper()
	s, err := remotestore.New(bs, prefix, remotestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func put(t *testing.T, bs blobstore.Blobstore, key string, data []byte) {
	t.Helper()
	if err := bs.Put(t.Context(), key, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
}

func TestReadAtReturnsExactlyTheRangeAskedFor(t *testing.T) {
	bs := memstore.New()
	data := blobstoretest.Payload(1, 100_003)
	put(t, bs, "job/sst/obj", data)
	s := newStorage(t, bs, "job/sst")

	r, size, err := s.ReadObject(t.Context(), "obj")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if size != int64(len(data)) {
		t.Fatalf("size %d, want %d", size, len(data))
	}
	for _, c := range []struct{ off, n int64 }{
		{0, 1}, {0, int64(len(data))}, {17, 4096}, {int64(len(data)) - 5, 5}, {int64(len(data)), 0}, {50_000, 0},
	} {
		p := make([]byte, c.n)
		if err := r.ReadAt(t.Context(), p, c.off); err != nil {
			t.Fatalf("ReadAt(%d, %d): %v", c.off, c.n, err)
		}
		if !bytes.Equal(p, data[c.off:c.off+c.n]) {
			t.Fatalf("ReadAt(%d, %d): wrong bytes", c.off, c.n)
		}
	}
}

func TestReadAtPastTheEndFailsWithoutPartialResult(t *testing.T) {
	bs := memstore.New()
	put(t, bs, "p/obj", []byte("0123456789"))
	s := newStorage(t, bs, "p")
	r, _, err := s.ReadObject(t.Context(), "obj")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ off, n int64 }{{5, 6}, {10, 1}, {11, 0}, {-1, 2}} {
		p := bytes.Repeat([]byte{'x'}, int(c.n))
		err := r.ReadAt(t.Context(), p, c.off)
		if err == nil {
			t.Fatalf("ReadAt(%d, %d) past the end of 10 bytes succeeded", c.off, c.n)
		}
		if !strings.Contains(err.Error(), `"p/obj"`) {
			t.Fatalf("ReadAt(%d, %d): error %q does not name the key", c.off, c.n, err)
		}
	}
}

func TestParallelReadAtOnOneReader(t *testing.T) {
	bs := memstore.New()
	data := blobstoretest.Payload(2, 1<<20)
	put(t, bs, "obj", data)
	s := newStorage(t, bs, "")
	r, _, err := s.ReadObject(t.Context(), "obj")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				off := int64((g*7919 + i*104729) % (len(data) - 4096))
				p := make([]byte, 1+(g*31+i)%4096)
				if err := r.ReadAt(t.Context(), p, off); err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(p, data[off:off+int64(len(p))]) {
					errs <- fmt.Errorf("goroutine %d read %d: wrong bytes at %d", g, i, off)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestMissingObjectIsNotExistAndNamed(t *testing.T) {
	bs := memstore.New()
	s := newStorage(t, bs, "job/sst")
	_, _, err := s.ReadObject(t.Context(), "gone.sst")
	if !s.IsNotExistError(err) || !strings.Contains(err.Error(), `"job/sst/gone.sst"`) {
		t.Fatalf("ReadObject of a missing object: %v; want a not-exist error naming job/sst/gone.sst", err)
	}
	_, err = s.Size("gone.sst")
	if !s.IsNotExistError(err) {
		t.Fatalf("Size of a missing object: %v, want not-exist", err)
	}
	if s.IsNotExistError(errors.New("other")) || s.IsNotExistError(nil) {
		t.Fatal("IsNotExistError is true for an unrelated error")
	}
}

func TestObjectDeletedAfterOpenFailsReads(t *testing.T) {
	bs := memstore.New()
	put(t, bs, "obj", []byte("0123456789"))
	s := newStorage(t, bs, "")
	r, _, err := s.ReadObject(t.Context(), "obj")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Delete("obj"); err != nil {
		t.Fatal(err)
	}
	err = r.ReadAt(t.Context(), make([]byte, 3), 2)
	if !s.IsNotExistError(err) || !strings.Contains(err.Error(), `"obj"`) {
		t.Fatalf("read of a deleted object: %v, want not-exist naming it", err)
	}
}

func TestObjectTruncatedAfterOpenFailsReads(t *testing.T) {
	bs := memstore.New()
	put(t, bs, "obj", []byte("0123456789"))
	s := newStorage(t, bs, "")
	r, _, err := s.ReadObject(t.Context(), "obj")
	if err != nil {
		t.Fatal(err)
	}
	put(t, bs, "obj", []byte("01234"))
	p := make([]byte, 6)
	err = r.ReadAt(t.Context(), p, 2)
	if !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), `"obj"`) {
		t.Fatalf("read of a truncated object: %v, want ErrUnexpectedEOF naming it", err)
	}
}

// flakyStore breaks the body of the first breaks ranged reads after half
// their bytes, as a reset connection does.
type flakyStore struct {
	blobstore.Blobstore
	breaks   atomic.Int32
	putErr   error
	putStart chan struct{} // closed when a Put starts reading, if non-nil
}

func (f *flakyStore) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	rc, err := f.Blobstore.GetRange(ctx, key, off, n)
	if err != nil || f.breaks.Add(-1) < 0 {
		return rc, err
	}
	return struct {
		io.Reader
		io.Closer
	}{io.MultiReader(io.LimitReader(rc, n/2), errReader{errors.New("connection reset by peer")}), rc}, nil
}

func (f *flakyStore) Put(ctx context.Context, key string, r io.Reader) error {
	if f.putStart != nil {
		close(f.putStart)
		<-ctx.Done()
		return ctx.Err()
	}
	if f.putErr != nil {
		_, _ = io.CopyN(io.Discard, r, 10)
		return f.putErr
	}
	return f.Blobstore.Put(ctx, key, r)
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

func TestReadAtResumesABrokenBody(t *testing.T) {
	fs := &flakyStore{Blobstore: memstore.New()}
	data := blobstoretest.Payload(3, 64<<10)
	put(t, fs, "obj", data)
	s := newStorage(t, fs, "")
	r, _, err := s.ReadObject(t.Context(), "obj")
	if err != nil {
		t.Fatal(err)
	}
	fs.breaks.Store(2)
	p := make([]byte, 40_000)
	if err := r.ReadAt(t.Context(), p, 1000); err != nil {
		t.Fatalf("ReadAt over two broken bodies: %v", err)
	}
	if !bytes.Equal(p, data[1000:41_000]) {
		t.Fatal("resumed read returned wrong bytes")
	}

	// A body that keeps breaking without progress fails, naming the key.
	fs.breaks.Store(100)
	if err := r.ReadAt(t.Context(), make([]byte, 1), 0); err == nil || !strings.Contains(err.Error(), `"obj"`) {
		t.Fatalf("ReadAt on a body that always breaks: %v, want an error naming the key", err)
	}
}

func TestCreateObjectAppearsOnlyWhenClosed(t *testing.T) {
	bs := memstore.New()
	s := newStorage(t, bs, "job")
	w, err := s.CreateObject("a.sst")
	if err != nil {
		t.Fatal(err)
	}
	data := blobstoretest.Payload(4, 1<<20+5)
	for chunk := range slices.Chunk(data, 32<<10) {
		if _, err := w.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := bs.Exists(t.Context(), "job/a.sst"); err != nil || ok {
		t.Fatalf("object visible before Close: %v %v", ok, err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	rc, err := bs.Get(t.Context(), "job/a.sst")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.Equal(got, data) {
		t.Fatalf("stored %d bytes, want the %d written", len(got), len(data))
	}
	if _, err := w.Write([]byte("x")); err == nil {
		t.Fatal("Write after Close succeeded")
	}

	// CreateObject on an existing name replaces the object.
	w, err = s.CreateObject("a.sst")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Size("a.sst"); err != nil || n != 0 {
		t.Fatalf("Size after re-creating empty: %d %v", n, err)
	}
}

func TestCreateObjectCloseReturnsThePutsError(t *testing.T) {
	putErr := errors.New("quota exceeded")
	fs := &flakyStore{Blobstore: memstore.New(), putErr: putErr}
	s := newStorage(t, fs, "")
	w, err := s.CreateObject("a.sst")
	if err != nil {
		t.Fatal(err)
	}
	var werr error
	for range 100 {
		if _, werr = w.Write(make([]byte, 4096)); werr != nil {
			break
		}
	}
	if !errors.Is(werr, putErr) {
		t.Fatalf("Write after the Put failed: %v, want %v", werr, putErr)
	}
	if err := w.Close(); !errors.Is(err, putErr) || !strings.Contains(err.Error(), `"a.sst"`) {
		t.Fatalf("Close: %v, want the Put's error naming the key", err)
	}
	if ok, _ := fs.Exists(t.Context(), "a.sst"); ok {
		t.Fatal("a failed upload left an object")
	}
}

func TestAbortLeavesNothing(t *testing.T) {
	bs := memstore.New()
	s := newStorage(t, bs, "")
	w, err := s.CreateObject("a.sst")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("half an sst")); err != nil {
		t.Fatal(err)
	}
	w.(remotestore.ObjectWriter).Abort(errors.New("compaction cancelled"))
	if err := w.Close(); err == nil {
		t.Fatal("Close after Abort succeeded")
	}
	if ok, _ := bs.Exists(t.Context(), "a.sst"); ok {
		t.Fatal("an aborted upload left an object")
	}
}

func TestCloseCancelsRunningUploads(t *testing.T) {
	fs := &flakyStore{Blobstore: memstore.New(), putStart: make(chan struct{})}
	s, err := remotestore.New(fs, "", remotestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.CreateObject("a.sst")
	if err != nil {
		t.Fatal(err)
	}
	<-fs.putStart
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Close of a writer whose Storage closed: %v, want context.Canceled", err)
	}
	if _, err := s.CreateObject("b.sst"); !errors.Is(err, remotestore.ErrClosed) {
		t.Fatalf("CreateObject after Close: %v, want ErrClosed", err)
	}
	if _, _, err := s.ReadObject(t.Context(), "a.sst"); !errors.Is(err, remotestore.ErrClosed) {
		t.Fatalf("ReadObject after Close: %v, want ErrClosed", err)
	}
}

func TestListFollowsPebblesDelimiterExamples(t *testing.T) {
	bs := memstore.New()
	for _, k := range []string{"a", "b/4", "b/5", "b/6"} {
		put(t, bs, "job/sst/"+k, nil)
	}
	put(t, bs, "job/other", nil) // outside the Storage's prefix
	s := newStorage(t, bs, "job/sst/")
	for _, c := range []struct {
		prefix, delim string
		want          []string
	}{
		{"", "", []string{"a", "b/4", "b/5", "b/6"}},
		{"", "/", []string{"a", "b"}},
		{"b", "/", []string{"4", "5", "6"}},
		{"b/", "/", []string{"4", "5", "6"}},
		{"b", "", []string{"/4", "/5", "/6"}},
		{"c", "", nil},
	} {
		got, err := s.List(c.prefix, c.delim)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("List(%q, %q) = %q, want %q", c.prefix, c.delim, got, c.want)
		}
	}
}

func TestListPagesThroughManyObjects(t *testing.T) {
	bs := memstore.New()
	for i := range 2500 {
		put(t, bs, fmt.Sprintf("p/%05d.sst.ref.1.%06d", i%3, i), nil)
	}
	s := newStorage(t, bs, "p")
	got, err := s.List("00001.sst.ref.", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 833 {
		t.Fatalf("List found %d ref markers, want 833", len(got))
	}
}

func TestDeleteIsIdempotent(t *testing.T) {
	bs := memstore.New()
	put(t, bs, "p/obj", []byte("x"))
	s := newStorage(t, bs, "p")
	for range 2 {
		if err := s.Delete("obj"); err != nil {
			t.Fatal(err)
		}
	}
	if ok, _ := bs.Exists(t.Context(), "p/obj"); ok {
		t.Fatal("object still there after Delete")
	}
}

func TestInvalidNamesAreRefused(t *testing.T) {
	s := newStorage(t, memstore.New(), "p")
	for _, name := range []string{"", "../x", "a//b", "a/./b"} {
		if _, err := s.CreateObject(name); !errors.Is(err, blobstore.ErrInvalidKey) {
			t.Errorf("CreateObject(%q): %v, want ErrInvalidKey", name, err)
		}
		if _, _, err := s.ReadObject(t.Context(), name); !errors.Is(err, blobstore.ErrInvalidKey) {
			t.Errorf("ReadObject(%q): %v, want ErrInvalidKey", name, err)
		}
	}
	if _, err := remotestore.New(memstore.New(), "../up", remotestore.Options{}); !errors.Is(err, blobstore.ErrInvalidKey) {
		t.Errorf("New with prefix ../up: %v, want ErrInvalidKey", err)
	}
}

// TestPebbleRunsOnIt is Pebble's own use of the interface: a database
// whose every SST lives in the store (flushes and compactions write them,
// reads, iterators and a reopen read them back, obsolete ones are
// deleted through it, with the reference markers Pebble keeps).
func TestPebbleRunsOnIt(t *testing.T) {
	bs := memstore.New()
	s := newStorage(t, bs, "job/sst")
	opts := func() *pebble.Options {
		o := &pebble.Options{FS: vfs.NewMem(), FormatMajorVersion: pebble.FormatNewest, MemTableSize: 256 << 10, L0CompactionThreshold: 2}
		o.Experimental.RemoteStorage = remote.MakeSimpleFactory(map[remote.Locator]remote.Storage{"": s})
		o.Experimental.CreateOnShared = remote.CreateOnSharedAll
		o.Experimental.SecondaryCacheSizeBytes = 4 << 20
		return o
	}
	o := opts()
	db, err := pebble.Open("db", o)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.SetCreatorID(7); err != nil {
		t.Fatal(err)
	}
	const n = 6_000
	val := func(i int) []byte { return []byte(fmt.Sprintf("value-%d-%s", i, strings.Repeat("v", i%50))) }
	for round := range 3 {
		for i := round; i < n; i += 3 {
			if err := db.Set(fmt.Appendf(nil, "k%06d", i), val(i), pebble.NoSync); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Compact(t.Context(), []byte("k"), []byte("l"), false); err != nil {
		t.Fatal(err)
	}
	check := func(db *pebble.DB) {
		t.Helper()
		it, err := db.NewIter(nil)
		if err != nil {
			t.Fatal(err)
		}
		i := 0
		for ok := it.First(); ok; ok = it.Next() {
			if want := fmt.Sprintf("k%06d", i); string(it.Key()) != want || !bytes.Equal(it.Value(), val(i)) {
				t.Fatalf("entry %d: key %q, want %q (or its value differs)", i, it.Key(), want)
			}
			i++
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
		if i != n {
			t.Fatalf("iterated %d keys, want %d", i, n)
		}
	}
	check(db)
	// Close waits for Pebble's background deletions of obsolete objects;
	// listing before it races them.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// The flushed L0 tables were compacted away: Pebble deleted them
	// (and their reference markers) through the Storage.
	tables := blobstoretest.ListKeys(t, bs, "job/sst/")
	var ssts, refs int
	for _, k := range tables {
		switch {
		case strings.Contains(k, ".sst.ref."):
			refs++
		case strings.HasSuffix(k, ".sst"):
			ssts++
		}
	}
	if ssts == 0 || ssts != refs || ssts >= 3 {
		t.Fatalf("after the compaction the store holds %d SSTs and %d ref markers: %q", ssts, refs, tables)
	}
	o2 := opts()
	o2.FS = o.FS
	db, err = pebble.Open("db", o2)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	check(db)
}
