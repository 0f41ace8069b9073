package savepoint_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"iter"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tidemark-io/tidemark/archive"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/memstore"
	"github.com/tidemark-io/tidemark/savepoint"
)

func TestPutStoresEachContentOnceAndReadsBackByteForByte(t *testing.T) {
	forEachStore(t, func(t *testing.T, bs blobstore.Blobstore) {
		f := state(6, 1000, "a")
		f["state/op-0/OPTIONS"] = nil
		f["state/op-1/OPTIONS"] = nil // same (empty) content twice
		st := mustPut(t, bs, "v1", f)
		if st.Files != 8 || st.Objects != 7 || st.Uploaded != 7 || st.Bytes != f.total() {
			t.Fatalf("stats %+v, want 8 files, 7 objects, all uploaded, %d bytes", st, f.total())
		}
		if n := len(contentKeys(t, bs)); n != 7 {
			t.Fatalf("%d content objects, want 7", n)
		}
		sameFiles(t, readBack(t, bs, "v1"), f)
		info, err := savepoint.Stat(t.Context(), bs, "v1")
		if err != nil || info.Format != savepoint.FormatManifest || info.Files != 8 || info.Bytes != f.total() {
			t.Fatalf("Stat: %+v, %v", info, err)
		}
	})
}

func TestIncrementalPutUploadsOnlyWhatTheAreaLacks(t *testing.T) {
	forEachStore(t, func(t *testing.T, bs blobstore.Blobstore) {
		c := &counter{prefix: savepoint.ContentPrefix}
		obs := blobstore.Observe(bs, c)
		base := state(100, 4096, "a")
		mustPut(t, obs, "v1", base)
		full, _ := c.sent()
		next := base.clone()
		next["state/op-1/000007.sst"] = bytes.Repeat([]byte("changed!"), 512)
		st := mustPut(t, obs, "v2", next)
		sent, puts := c.sent()
		if st.Uploaded != 1 || st.UploadedBytes != 4096 || puts != 1 || sent != 4096 {
			t.Fatalf("after 1 %% churn: stats %+v, %d puts of %d bytes; want one file of 4096 bytes (the full one sent %d)", st, puts, sent, full)
		}
		sameFiles(t, readBack(t, bs, "v2"), next)
		sameFiles(t, readBack(t, bs, "v1"), base)
	})
}

func TestPutRefusesContentThatDisagreesWithTheManifest(t *testing.T) {
	forEachStore(t, func(t *testing.T, bs blobstore.Blobstore) {
		for name, lie := range map[string][]byte{
			"other bytes": []byte("xxxx"),
			"shorter":     []byte("abc"),
			"longer":      []byte("abcde"),
		} {
			f := files{"state/o/a": []byte("abcd")}
			m := f.manifest()
			f["state/o/a"] = lie
			_, err := savepoint.Put(t.Context(), bs, "bad", m, f.open, savepoint.Options{})
			if !errors.Is(err, archive.ErrCorrupt) {
				t.Fatalf("%s: %v, want ErrCorrupt", name, err)
			}
			if ok, _ := bs.Exists(t.Context(), savepoint.LabelKey("bad")); ok {
				t.Fatalf("%s: a manifest was published", name)
			}
			if ok, _ := bs.Exists(t.Context(), savepoint.ContentKey(m.Files[0].SHA256)); ok {
				t.Fatalf("%s: a content object holds bytes that disagree with its name", name)
			}
		}
	})
}

func TestPutRefusesATakenLabelUnlessToldToReplace(t *testing.T) {
	forEachStore(t, func(t *testing.T, bs blobstore.Blobstore) {
		a, b := state(2, 10, "a"), state(2, 10, "b")
		mustPut(t, bs, "v1", a)
		_, err := savepoint.Put(t.Context(), bs, "v1", b.manifest(), b.open, savepoint.Options{})
		if !errors.Is(err, savepoint.ErrExists) || !errors.Is(err, blobstore.ErrPreconditionFailed) {
			t.Fatalf("taken label: %v, want ErrExists", err)
		}
		if n := len(contentKeys(t, bs)); n != 2 {
			t.Fatalf("the refused put uploaded content: %d objects", n)
		}
		sameFiles(t, readBack(t, bs, "v1"), a)
		if _, err := savepoint.Put(t.Context(), bs, "v1", b.manifest(), b.open, savepoint.Options{Replace: true}); err != nil {
			t.Fatal(err)
		}
		sameFiles(t, readBack(t, bs, "v1"), b)
	})
}

func TestAnArchiveFormatSavepointReadsAsItIs(t *testing.T) {
	forEachStore(t, func(t *testing.T, bs blobstore.Blobstore) {
		f := state(3, 100, "old")
		ar := archiveOf(t, f)
		if err := bs.Put(t.Context(), savepoint.LabelKey("old"), bytes.NewReader(ar)); err != nil {
			t.Fatal(err)
		}
		info, err := savepoint.Stat(t.Context(), bs, "old")
		if err != nil || info.Format != savepoint.FormatArchive || info.Bytes != int64(len(ar)) {
			t.Fatalf("Stat: %+v, %v", info, err)
		}
		sp, err := savepoint.Open(t.Context(), bs, "old", savepoint.Options{})
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := sp.WriteArchive(t.Context(), &out); err != nil {
			t.Fatal(err)
		}
		sp.Close()
		if !bytes.Equal(out.Bytes(), ar) {
			t.Fatal("the archive written differs from the one stored")
		}
		sp, err = savepoint.Open(t.Context(), bs, "old", savepoint.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer sp.Close()
		if m, err := sp.Verify(t.Context()); err != nil || len(m.Files) != 3 {
			t.Fatalf("Verify: %v", err)
		}
	})
}

func TestOpenOfAMissingSavepointIsNotFound(t *testing.T) {
	forEachStore(t, func(t *testing.T, bs blobstore.Blobstore) {
		if _, err := savepoint.Open(t.Context(), bs, "nope", savepoint.Options{}); !errors.Is(err, blobstore.ErrNotFound) {
			t.Fatalf("Open: %v, want ErrNotFound", err)
		}
		if _, err := savepoint.Stat(t.Context(), bs, "nope"); !errors.Is(err, blobstore.ErrNotFound) {
			t.Fatalf("Stat: %v, want ErrNotFound", err)
		}
		if _, err := savepoint.Open(t.Context(), bs, "nope", savepoint.Options{}); err == nil {
			t.Fatal("opened")
		}
		if keys := locks(t, bs); len(keys) != 0 {
			t.Fatalf("a failed open left locks: %v", keys)
		}
	})
}

func TestVerifyFindsDamagedAndMissingContent(t *testing.T) {
	forEachStore(t, func(t *testing.T, bs blobstore.Blobstore) {
		f := state(3, 100, "a")
		mustPut(t, bs, "v1", f)
		m := f.manifest()
		verify := func() error {
			sp, err := savepoint.Open(t.Context(), bs, "v1", savepoint.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer sp.Close()
			_, err = sp.Verify(t.Context())
			return err
		}
		if err := verify(); err != nil {
			t.Fatal(err)
		}
		key := savepoint.ContentKey(m.Files[1].SHA256)
		damaged := bytes.Clone(f[m.Files[1].Path])
		damaged[7] ^= 1
		if err := bs.Put(t.Context(), key, bytes.NewReader(damaged)); err != nil {
			t.Fatal(err)
		}
		if err := verify(); !errors.Is(err, archive.ErrCorrupt) || !strings.Contains(err.Error(), key) {
			t.Fatalf("damaged content: %v, want ErrCorrupt naming %s", err, key)
		}
		if err := bs.Delete(t.Context(), key); err != nil {
			t.Fatal(err)
		}
		if err := verify(); !errors.Is(err, archive.ErrCorrupt) || !strings.Contains(err.Error(), "missing") {
			t.Fatalf("missing content: %v, want ErrCorrupt saying missing", err)
		}
	})
}

func TestPutRepairsContentOfTheWrongSize(t *testing.T) {
	forEachStore(t, func(t *testing.T, bs blobstore.Blobstore) {
		f := state(2, 100, "a")
		m := f.manifest()
		key := savepoint.ContentKey(m.Files[0].SHA256)
		if err := bs.Put(t.Context(), key, strings.NewReader("truncated")); err != nil {
			t.Fatal(err)
		}
		if st := mustPut(t, bs, "v1", f); st.Uploaded != 2 {
			t.Fatalf("uploaded %d, want both (one repaired)", st.Uploaded)
		}
		sameFiles(t, readBack(t, bs, "v1"), f)
	})
}

func TestManyFilesAreFoundPresentByOneListing(t *testing.T) {
	bs := &listCounter{Blobstore: memstore.New()}
	base := state(200, 10, "a")
	mustPut(t, bs, "v1", base)
	bs.stats.Store(0)
	bs.lists.Store(0)
	st := mustPut(t, bs, "v2", base)
	if st.Uploaded != 0 || bs.stats.Load() != 0 || bs.lists.Load() != 1 {
		t.Fatalf("%+v: %d HEADs and %d listings, want no upload and one listing", st, bs.stats.Load(), bs.lists.Load())
	}
}

type listCounter struct {
	blobstore.Blobstore
	stats, lists atomic.Int64
}

func (l *listCounter) Stat(ctx context.Context, key string) (blobstore.ObjectInfo, error) {
	if strings.HasPrefix(key, savepoint.ContentPrefix) {
		l.stats.Add(1)
	}
	return l.Blobstore.Stat(ctx, key)
}

func (l *listCounter) List(ctx context.Context, prefix string) iter.Seq2[blobstore.ObjectInfo, error] {
	if prefix == savepoint.ContentPrefix {
		l.lists.Add(1)
	}
	return l.Blobstore.List(ctx, prefix)
}

func TestReadManifestReadsBothFormatsAndTakesNoLock(t *testing.T) {
	forEachStore(t, func(t *testing.T, bs blobstore.Blobstore) {
		f := state(3, 10, "a")
		mustPut(t, bs, "new", f)
		if err := bs.Put(t.Context(), savepoint.LabelKey("old"), bytes.NewReader(archiveOf(t, f))); err != nil {
			t.Fatal(err)
		}
		ro := &noWrites{Blobstore: bs}
		for label, format := range map[string]savepoint.Format{"new": savepoint.FormatManifest, "old": savepoint.FormatArchive} {
			m, got, err := savepoint.ReadManifest(t.Context(), ro, label, savepoint.Options{})
			if err != nil || got != format || len(m.Files) != 3 || m.Files[0] != f.manifest().Files[0] {
				t.Fatalf("%s: %v, %v, %v", label, m, got, err)
			}
		}
		if ro.writes.Load() != 0 {
			t.Fatalf("%d writes", ro.writes.Load())
		}
	})
}

// noWrites counts the writes made through it.
type noWrites struct {
	blobstore.Blobstore
	writes atomic.Int64
}

func (n *noWrites) PutIfAbsent(ctx context.Context, key string, r io.Reader) (string, error) {
	n.writes.Add(1)
	return n.Blobstore.PutIfAbsent(ctx, key, r)
}
