package savepoint_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tidemark-io/tidemark/archive"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/memstore"
	"github.com/tidemark-io/tidemark/savepoint"
)

func TestCopySendsOnlyWhatTheDestinationLacks(t *testing.T) {
	forEachStore(t, func(t *testing.T, src blobstore.Blobstore) {
		dst := memstore.New()
		c := &counter{prefix: savepoint.ContentPrefix}
		base := state(100, 1000, "a")
		next := base.clone()
		next["state/op-0/000010.sst"] = bytes.Repeat([]byte("z"), 1000)
		mustPut(t, src, "v1", base)
		mustPut(t, src, "v2", next)
		if _, err := savepoint.Copy(t.Context(), src, blobstore.Observe(dst, c), "v1", savepoint.Options{}); err != nil {
			t.Fatal(err)
		}
		if sent, _ := c.sent(); sent != base.total() {
			t.Fatalf("first copy sent %d bytes, want all %d", sent, base.total())
		}
		st, err := savepoint.Copy(t.Context(), src, blobstore.Observe(dst, c), "v2", savepoint.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if sent, puts := c.sent(); sent != 1000 || puts != 1 || st.UploadedBytes != 1000 {
			t.Fatalf("copy of v2 to a store holding v1 sent %d bytes in %d puts (stats %+v), want the one changed file", sent, puts, st)
		}
		sameFiles(t, readBack(t, dst, "v2"), next)
		if _, err := savepoint.Copy(t.Context(), src, dst, "v2", savepoint.Options{}); !errors.Is(err, savepoint.ErrExists) {
			t.Fatalf("copy onto a taken label: %v, want ErrExists", err)
		}
	})
}

// failingAfter fails every content upload after the first n.
type failingAfter struct {
	blobstore.Blobstore
	n atomic.Int64
}

func (f *failingAfter) PutIfAbsent(ctx context.Context, key string, r io.Reader) (string, error) {
	if strings.HasPrefix(key, savepoint.ContentPrefix) && f.n.Add(-1) < 0 {
		return "", errors.New("connection reset (injected)")
	}
	return f.Blobstore.PutIfAbsent(ctx, key, r)
}

func TestAnInterruptedCopyResumesWithoutResending(t *testing.T) {
	src, dst := memstore.New(), memstore.New()
	f := state(40, 1000, "a")
	mustPut(t, src, "v1", f)
	c := &counter{prefix: savepoint.ContentPrefix}
	broken := &failingAfter{Blobstore: blobstore.Observe(dst, c)}
	broken.n.Store(15)
	opts := savepoint.Options{Concurrency: 1}
	if _, err := savepoint.Copy(t.Context(), src, broken, "v1", opts); err == nil {
		t.Fatal("the broken copy succeeded")
	}
	if ok, _ := dst.Exists(t.Context(), savepoint.LabelKey("v1")); ok {
		t.Fatal("the interrupted copy published its manifest")
	}
	arrived := len(contentKeys(t, dst))
	first, _ := c.sent()
	if arrived != 15 {
		t.Fatalf("%d objects arrived before the failure, want 15", arrived)
	}
	st, err := savepoint.Copy(t.Context(), src, blobstore.Observe(dst, c), "v1", opts)
	if err != nil {
		t.Fatal(err)
	}
	second, _ := c.sent()
	if st.Uploaded != 40-arrived || second != f.total()-int64(arrived)*1000 {
		t.Fatalf("the resumed copy sent %d objects, %d bytes (the first sent %d); want only the %d missing", st.Uploaded, second, first, 40-arrived)
	}
	sameFiles(t, readBack(t, dst, "v1"), f)
}

func TestCopyOfAnArchiveFormatSavepointStoresItByContent(t *testing.T) {
	forEachStore(t, func(t *testing.T, src blobstore.Blobstore) {
		dst := memstore.New()
		old := state(5, 100, "o")
		if err := src.Put(t.Context(), savepoint.LabelKey("old"), bytes.NewReader(archiveOf(t, old))); err != nil {
			t.Fatal(err)
		}
		mustPut(t, dst, "other", old) // dst holds the content already
		st, err := savepoint.Copy(t.Context(), src, dst, "old", savepoint.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if st.Uploaded != 0 || st.Files != 5 {
			t.Fatalf("stats %+v, want 5 files and nothing sent", st)
		}
		if info, _ := savepoint.Stat(t.Context(), dst, "old"); info.Format != savepoint.FormatManifest {
			t.Fatalf("copy stored as %v", info.Format)
		}
		sameFiles(t, readBack(t, dst, "old"), old)
	})
}

func TestImportUploadsOnlyMissingAndRefusesADamagedArchive(t *testing.T) {
	forEachStore(t, func(t *testing.T, bs blobstore.Blobstore) {
		base := state(10, 100, "a")
		mustPut(t, bs, "v1", base)
		next := base.clone()
		next["state/op-1/000001.sst"] = []byte("new")
		ar := archiveOf(t, next)
		damaged := bytes.Clone(ar)
		i := bytes.Index(damaged, []byte("new"))
		damaged[i] = 'N'
		_, err := savepoint.Import(t.Context(), bs, "v2", bytes.NewReader(damaged), savepoint.Options{})
		if !errors.Is(err, archive.ErrCorrupt) {
			t.Fatalf("damaged archive: %v, want ErrCorrupt", err)
		}
		if ok, _ := bs.Exists(t.Context(), savepoint.LabelKey("v2")); ok {
			t.Fatal("the damaged archive was published")
		}
		if ok, _ := bs.Exists(t.Context(), savepoint.ContentKey(digestOf([]byte("New")))); ok {
			t.Fatal("damaged content was stored")
		}
		st, err := savepoint.Import(t.Context(), bs, "v2", bytes.NewReader(ar), savepoint.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if st.Uploaded != 1 || st.UploadedBytes != 3 {
			t.Fatalf("import stats %+v, want the one new file", st)
		}
		sameFiles(t, readBack(t, bs, "v2"), next)
		// Exported again, it is the same archive byte for byte.
		sp, err := savepoint.Open(t.Context(), bs, "v2", savepoint.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer sp.Close()
		var out bytes.Buffer
		if err := sp.WriteArchive(t.Context(), &out); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out.Bytes(), ar) {
			t.Fatal("export of an import differs from the archive imported")
		}
	})
}
