package checkpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"testing"

	"github.com/tidemark-io/tidemark/archive"
	"github.com/tidemark-io/tidemark/blobstore/memstore"
)

// archived returns the archive of checkpoint id of s.
func archived(t testing.TB, s Storage, id string) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := ArchiveCheckpoint(t.Context(), s, id, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// withRecord returns archive a with its record edited: a crafted input,
// which a real writer never produces, built with archive.Write so that
// every digest still holds.
func withRecord(t testing.TB, a []byte, edit func(cp *CheckpointData)) []byte {
	t.Helper()
	rd, err := archive.NewReader(t.Context(), bytes.NewReader(a), archive.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	m := *rd.Manifest()
	files := map[string][]byte{}
	if err := rd.ReadFiles(t.Context(), func(f archive.File, r io.Reader) error {
		b, err := io.ReadAll(r)
		files[f.Path] = b
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var cp CheckpointData
	if err := json.Unmarshal(m.Record, &cp); err != nil {
		t.Fatal(err)
	}
	edit(&cp)
	m.Record, _ = json.Marshal(&cp)
	var out bytes.Buffer
	open := func(_ context.Context, p string) (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(files[p])), nil
	}
	if err := archive.Write(t.Context(), &out, &m, open, archive.WriteOptions{}); err != nil {
		t.Fatalf("write crafted archive: %v", err)
	}
	return out.Bytes()
}

// refusingWriter is a Storage whose writer role was lost.
type refusingWriter struct{ *FileStorage }

var errNotTheWriter = errors.New("not the writer")

var _ WriterRole = refusingWriter{}

func (refusingWriter) Acquire(context.Context) (uint64, error) { return 0, errNotTheWriter }

func (refusingWriter) CheckWriter(context.Context) error { return errNotTheWriter }

// A refused extraction, for any reason found in the archive or the
// target, leaves the destination byte-identical: no state directory, no
// staging directory, no record.
func TestRefusedExtractLeavesTheDestinationByteIdentical(t *testing.T) {
	src := sourceStorage(t)
	good := archived(t, src, NewID(2))
	flipped := bytes.Clone(good)
	flipped[len(flipped)*3/4] ^= 0xff
	cases := map[string]struct {
		archive []byte
		target  func(*FileStorage) Storage
	}{
		"a flipped byte":          {archive: flipped},
		"truncated":               {archive: good[:len(good)/2]},
		"bytes after the end":     {archive: append(bytes.Clone(good), []byte("trailing garbage")...)},
		"a prepared record":       {archive: withRecord(t, good, func(cp *CheckpointData) { cp.Status = StatusPrepared })},
		"nested state dirs":       {archive: withRecord(t, good, func(cp *CheckpointData) { cp.StateDirs["w1"] = "w0/inside" })},
		"an id nothing follows":   {archive: withRecord(t, good, func(cp *CheckpointData) { cp.ID = "zzz" })},
		"a target not the writer": {archive: good, target: func(fs *FileStorage) Storage { return refusingWriter{fs} }},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dst := NewFileStorage(t.TempDir())
			mustSave(t, dst, record(NewID(1), StatusCompleted))
			before := treeFiles(t, dst.Dir())
			var target Storage = dst
			if tc.target != nil {
				target = tc.target(dst)
			}
			if id, err := ExtractCheckpoint(t.Context(), target, bytes.NewReader(tc.archive)); err == nil {
				t.Fatalf("extract accepted it as %s", id)
			}
			if after := treeFiles(t, dst.Dir()); !maps.Equal(after, before) {
				t.Fatalf("a refused extraction changed the destination:\nbefore %v\nafter  %v", before, after)
			}
		})
	}
}

// FuzzExtractCheckpoint feeds ExtractCheckpoint (and so RestoreSavepoint)
// any bytes, onto a destination that already holds a checkpoint: it never
// panics, and either restores a completed checkpoint as the latest or
// leaves the destination byte-identical. The seeds are a good archive and
// one of each class a refusal must handle.
func FuzzExtractCheckpoint(f *testing.F) {
	src := sourceStorage(f)
	good := archived(f, src, NewID(2))
	f.Add(good)
	f.Add(good[:len(good)/3])
	f.Add(append(bytes.Clone(good), 0x28, 0xb5, 0x2f, 0xfd))
	f.Add(withRecord(f, good, func(cp *CheckpointData) { cp.Status = StatusPrepared }))
	f.Add(withRecord(f, good, func(cp *CheckpointData) { cp.StateDirs["w0"] = "x/../y" }))
	f.Add(withRecord(f, good, func(cp *CheckpointData) { cp.ID = NewID(0) }))
	f.Add([]byte{0x1f, 0x8b, 8, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		dst := NewFileStorage(t.TempDir())
		mustSave(t, dst, record(NewID(5), StatusCompleted))
		before := treeFiles(t, dst.Dir())
		id, err := ExtractCheckpoint(t.Context(), dst, bytes.NewReader(b))
		if err != nil {
			if after := treeFiles(t, dst.Dir()); !maps.Equal(after, before) {
				t.Fatalf("refused (%v) but changed the destination", err)
			}
			return
		}
		lc, err := dst.LoadLatestCompleted(t.Context())
		if err != nil || lc == nil || lc.ID != id || !lc.Completed() {
			t.Fatalf("extracted %s, latest completed %+v, %v", id, lc, err)
		}
	})
}

// CopySavepoint copies exactly the archive: bytes after its end (a zstd
// skippable frame, garbage) fail the copy, and nothing appears in the
// destination.
func TestCopySavepointRefusesBytesAfterTheArchive(t *testing.T) {
	good := archived(t, sourceStorage(t), NewID(2))
	skippable := []byte{0x50, 0x2a, 0x4d, 0x18, 4, 0, 0, 0, 'e', 'v', 'i', 'l'}
	for name, tail := range map[string][]byte{"garbage": []byte("trailing garbage"), "a zstd skippable frame": skippable} {
		t.Run(name, func(t *testing.T) {
			src, dst := memstore.New(), memstore.New()
			if err := src.Put(t.Context(), SavepointKey("sp"), bytes.NewReader(append(bytes.Clone(good), tail...))); err != nil {
				t.Fatal(err)
			}
			if err := CopySavepoint(t.Context(), src, dst, "sp"); !errors.Is(err, archive.ErrCorrupt) {
				t.Fatalf("copy: %v, want ErrCorrupt", err)
			}
			if ok, _ := dst.Exists(t.Context(), SavepointKey("sp")); ok {
				t.Fatal("the refused copy is visible in the destination")
			}
		})
	}
}
