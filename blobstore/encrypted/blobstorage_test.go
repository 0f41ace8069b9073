package encrypted_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
	"github.com/tidemark-io/tidemark/blobstore/encrypted"
	"github.com/tidemark-io/tidemark/blobstore/memstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/savepoint"
)

const marker = "TIDEMARK-PLAINTEXT-MARKER"

// stateOf is the content of the test's state files: a shared table over
// several chunks and a private file, both holding the marker.
func stateOf() map[string][]byte {
	table := append(blobstoretest.Payload(5, 3*encrypted.ChunkSize+99), marker...)
	return map[string][]byte{
		"000007.sst":      table,
		"MANIFEST-000001": []byte("manifest " + marker),
	}
}

func saveCheckpoint(t *testing.T, bs blobstore.Blobstore) (*blobstorage.Storage, string) {
	t.Helper()
	s := blobstorage.New(bs, t.TempDir(), blobstorage.Options{})
	if _, err := s.Acquire(t.Context()); err != nil {
		t.Fatal(err)
	}
	id := checkpoint.NewID(1)
	dir := filepath.Join(s.StateDir(id), "counts")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range stateOf() {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d := &checkpoint.CheckpointData{
		ID:        id,
		Timestamp: time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC),
		Operators: map[string][]byte{"0": []byte("op")},
		Source:    map[string][]byte{checkpoint.SourceOffsetsKey: []byte("off")},
		StateDirs: map[string]string{"counts": "counts"},
	}
	if err := s.Save(t.Context(), d); err != nil {
		t.Fatal(err)
	}
	return s, id
}

// writer returns a Storage on bs holding the writer role.
func writer(t *testing.T, bs blobstore.Blobstore) *blobstorage.Storage {
	t.Helper()
	s := blobstorage.New(bs, t.TempDir(), blobstorage.Options{})
	if _, err := s.Acquire(t.Context()); err != nil {
		t.Fatal(err)
	}
	return s
}

func rawGet(t *testing.T, bs blobstore.Blobstore, key string) []byte {
	t.Helper()
	return blobstoretest.Get(t, bs, key)
}

func checkRestored(t *testing.T, bs blobstore.Blobstore, id string) {
	t.Helper()
	s := blobstorage.New(bs, t.TempDir(), blobstorage.Options{})
	if err := s.Restore(t.Context(), id); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	for name, want := range stateOf() {
		got, err := os.ReadFile(filepath.Join(s.StateDir(id), "counts", name))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("restored %s: %d bytes, %v; want the %d bytes saved", name, len(got), err, len(want))
		}
	}
	if err := s.Verify(t.Context(), id); err != nil {
		t.Fatalf("Verify: %v", err)
	}
}

func verifySavepoint(t *testing.T, bs blobstore.Blobstore, label string) {
	t.Helper()
	sp, err := savepoint.Open(t.Context(), bs, label, savepoint.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	if _, err := sp.Verify(t.Context()); err != nil {
		t.Fatalf("verify savepoint %s: %v", label, err)
	}
}

// A checkpoint saved through the decorator (default predicate) restores
// and verifies; the stored state files and savepoint hold no plaintext,
// while records stay plain; the default predicate agrees with
// blobstorage.KeyClass on every key written; a store with another key is
// refused naming both ids.
func TestCheckpointThroughEncryptedStore(t *testing.T) {
	ctx := t.Context()
	base := memstore.New()
	k1, k2 := testKey(t, 21), testKey(t, 22)
	enc := wrap(t, base, k1, nil)
	src, id := saveCheckpoint(t, enc)
	checkRestored(t, enc, id)
	if _, err := checkpoint.CreateSavepoint(ctx, src, enc, "sp"); err != nil {
		t.Fatal(err)
	}
	verifySavepoint(t, enc, "sp")

	classes := map[string]int{}
	for _, key := range blobstoretest.ListKeys(t, base, "") {
		class := blobstorage.KeyClass(key)
		if c := savepoint.Class(key); c == "content" || c == "lock" {
			class = "savepoint " + c // the savepoint area (package savepoint's layout)
		}
		classes[class]++
		secret := slices.Contains([]string{"private", "shared", "remote", "savepoint", "savepoint content"}, class)
		if encrypted.DefaultEncrypt(key) != secret {
			t.Errorf("DefaultEncrypt(%q) = %v for a key of class %s", key, !secret, class)
		}
		raw := rawGet(t, base, key)
		if secret && (bytes.Contains(raw, []byte(marker)) || !bytes.HasPrefix(raw, []byte("TMKENC"))) {
			t.Errorf("%s (%s) is stored in the clear", key, class)
		}
		if class == "record" && !bytes.Contains(raw, []byte(`"`+id+`"`)) {
			t.Errorf("record %s is not plain JSON naming %s", key, id)
		}
	}
	for _, c := range []string{"private", "shared", "savepoint", "savepoint content", "record"} {
		if classes[c] == 0 {
			t.Fatalf("no %s key written (%v): the test checks nothing", c, classes)
		}
	}

	// Another key: the restore is refused naming both key ids.
	other := blobstorage.New(wrap(t, base, k2, nil), t.TempDir(), blobstorage.Options{})
	err := other.Restore(ctx, id)
	if !errors.Is(err, encrypted.ErrWrongKey) || !strings.Contains(err.Error(), k1.ID) || !strings.Contains(err.Error(), k2.ID) {
		t.Fatalf("Restore with another key: %v; want ErrWrongKey naming %s and %s", err, k1.ID, k2.ID)
	}
	if _, err := checkpoint.RestoreSavepoint(ctx, writer(t, memstore.New()), wrap(t, base, k2, nil), "sp"); !errors.Is(err, encrypted.ErrWrongKey) {
		t.Fatalf("RestoreSavepoint with another key: %v, want ErrWrongKey", err)
	}
}

// rawSavepoint returns the stored bytes of savepoint sp and of every
// content object of bs, as they are stored.
func rawSavepoint(t *testing.T, bs blobstore.Blobstore) []byte {
	raw := rawGet(t, bs, "savepoints/sp")
	for _, key := range blobstoretest.ListKeys(t, bs, savepoint.ContentPrefix) {
		raw = append(raw, rawGet(t, bs, key)...)
	}
	return raw
}

// An encrypted savepoint copies to a plain store and to a store encrypted
// under another key; both copies verify and restore.
func TestSavepointCopiesAcrossKeys(t *testing.T) {
	ctx := t.Context()
	base, plain, otherBase := memstore.New(), memstore.New(), memstore.New()
	k1, k2 := testKey(t, 31), testKey(t, 32)
	enc := wrap(t, base, k1, nil)
	src, id := saveCheckpoint(t, enc)
	if _, err := checkpoint.CreateSavepoint(ctx, src, enc, "sp"); err != nil {
		t.Fatal(err)
	}
	other := wrap(t, otherBase, k2, nil)
	for name, dst := range map[string]blobstore.Blobstore{"plain": plain, "other key": other} {
		if err := checkpoint.CopySavepoint(ctx, enc, dst, "sp"); err != nil {
			t.Fatalf("CopySavepoint to the %s store: %v", name, err)
		}
		verifySavepoint(t, dst, "sp")
		got, err := checkpoint.RestoreSavepoint(ctx, writer(t, memstore.New()), dst, "sp")
		if err != nil || got != id {
			t.Fatalf("RestoreSavepoint from the %s store: %q, %v", name, got, err)
		}
	}
	if !bytes.Contains(rawSavepoint(t, plain), []byte(marker)) {
		t.Fatal("the plain copy does not hold the plaintext")
	}
	if bytes.Contains(rawSavepoint(t, otherBase), []byte(marker)) {
		t.Fatal("the copy under another key holds the plaintext")
	}
	// And back: a plain savepoint copies into an encrypted store.
	if err := checkpoint.CopySavepoint(ctx, plain, wrap(t, memstore.New(), k1, nil), "sp"); err != nil {
		t.Fatal(err)
	}
	rc, err := wrap(t, otherBase, k1, nil).Get(ctx, "savepoints/sp")
	if err == nil {
		io.Copy(io.Discard, rc)
		rc.Close()
	}
	if !errors.Is(err, encrypted.ErrWrongKey) {
		t.Fatalf("reading the other key's copy with k1: %v, want ErrWrongKey", err)
	}
}

// A checkpoint saved through the decorator names the key id in its record
// (encryption_key_id), a plain one does not; a restore without the key or
// with another is refused naming the recorded id before it touches the
// local state directory or leaves a pin; a record without the field (as
// written before it existed) restores as before; a malformed id is a
// damaged record.
func TestRecordNamesTheKey(t *testing.T) {
	ctx := t.Context()
	base := memstore.New()
	k1, k2 := testKey(t, 41), testKey(t, 42)
	_, id := saveCheckpoint(t, wrap(t, base, k1, nil))
	recKey := "checkpoints/" + id + "/checkpoint.json"
	raw := rawGet(t, base, recKey)
	if got := recordField(t, raw, "encryption_key_id"); got != k1.ID {
		t.Fatalf("the record names key id %v, want %s: %s", got, k1.ID, raw)
	}
	rec, err := blobstorage.New(base, t.TempDir(), blobstorage.Options{}).LoadRecord(ctx, id)
	if err != nil || rec.EncryptionKeyID != k1.ID {
		t.Fatalf("LoadRecord without the key: %+v, %v; want EncryptionKeyID %s", rec, err, k1.ID)
	}

	plain := memstore.New()
	saveCheckpoint(t, plain)
	if raw := rawGet(t, plain, recKey); recordField(t, raw, "encryption_key_id") != nil {
		t.Fatalf("a plain record names a key: %s", raw)
	}

	// A stale local state directory a restore would replace, and pins.
	refused := func(name string, bs blobstore.Blobstore, want error, ids ...string) {
		t.Helper()
		s := blobstorage.New(bs, t.TempDir(), blobstorage.Options{})
		stale := filepath.Join(s.StateDir(id), "counts", "000007.sst")
		if err := os.MkdirAll(filepath.Dir(stale), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(stale, []byte("stale"), 0o644); err != nil {
			t.Fatal(err)
		}
		err := s.Restore(ctx, id)
		if !errors.Is(err, want) {
			t.Fatalf("Restore %s: %v, want %v", name, err, want)
		}
		for _, kid := range ids {
			if !strings.Contains(err.Error(), kid) {
				t.Errorf("Restore %s: %q does not name key id %s", name, err, kid)
			}
		}
		if b, err := os.ReadFile(stale); err != nil || string(b) != "stale" {
			t.Errorf("Restore %s changed the local state directory: %q, %v", name, b, err)
		}
		if pins := blobstoretest.ListKeys(t, base, "pins/"); len(pins) != 0 {
			t.Errorf("Restore %s left pins: %v", name, pins)
		}
	}
	refused("without a key", base, encrypted.ErrNoKey, k1.ID)
	refused("through Detect", encrypted.Detect(base, encrypted.Options{}), encrypted.ErrNoKey, k1.ID)
	refused("with another key", wrap(t, base, k2, nil), encrypted.ErrWrongKey, k1.ID, k2.ID)

	// A record from before the field: refused with another key all the
	// same (its first file's header tells), and restores with the key.
	put(t, base, recKey, withField(t, raw, "encryption_key_id", nil))
	refused("of a record without the field, with another key", wrap(t, base, k2, nil), encrypted.ErrWrongKey, k1.ID, k2.ID)
	checkRestored(t, wrap(t, base, k1, nil), id)

	put(t, base, recKey, withField(t, raw, "encryption_key_id", "a b"))
	if _, err := blobstorage.New(base, t.TempDir(), blobstorage.Options{}).LoadRecord(ctx, id); err == nil {
		t.Fatal("a record with a malformed key id loads")
	}
}

// recordField returns field of the JSON object raw (nil when absent).
func recordField(t *testing.T, raw []byte, field string) any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m[field]
}

// withField returns the JSON object raw with field set to v, or removed
// when v is nil.
func withField(t *testing.T, raw []byte, field string, v any) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if v == nil {
		delete(m, field)
	} else {
		m[field] = v
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A savepoint's manifest names the key id of its content
// (encryption_key_id in its header line): the writer's, the destination's
// after a copy, none in a plain store. Where the manifest itself is left
// plain (a predicate that encrypts only content), a reader without the
// key, or with another, is refused naming the recorded id before any
// content is read or anything is written to the store restored into.
func TestManifestNamesTheKey(t *testing.T) {
	ctx := t.Context()
	k1, k2 := testKey(t, 51), testKey(t, 52)
	check := func(name string, bs blobstore.Blobstore, want string) {
		t.Helper()
		info, err := savepoint.Stat(ctx, bs, "sp")
		if err != nil || info.EncryptionKeyID != want {
			t.Fatalf("%s: Stat: key id %q, %v; want %q", name, info.EncryptionKeyID, err, want)
		}
		sp, err := savepoint.Open(ctx, bs, "sp", savepoint.Options{})
		if err != nil {
			t.Fatalf("%s: Open: %v", name, err)
		}
		defer sp.Close()
		if sp.EncryptionKeyID != want {
			t.Fatalf("%s: Open: key id %q, want %q", name, sp.EncryptionKeyID, want)
		}
		if _, err := sp.Verify(ctx); err != nil {
			t.Fatalf("%s: Verify: %v", name, err)
		}
	}
	base := memstore.New()
	enc := wrap(t, base, k1, nil)
	src, _ := saveCheckpoint(t, enc)
	if _, err := checkpoint.CreateSavepoint(ctx, src, enc, "sp"); err != nil {
		t.Fatal(err)
	}
	check("encrypted", enc, k1.ID)
	plain, other := memstore.New(), wrap(t, memstore.New(), k2, nil)
	for _, dst := range map[string]blobstore.Blobstore{"plain copy": plain, "copy under another key": other} {
		if err := checkpoint.CopySavepoint(ctx, enc, dst, "sp"); err != nil {
			t.Fatal(err)
		}
	}
	check("plain copy", plain, "")
	check("copy under another key", other, k2.ID)

	// Content encrypted, manifests plain: the manifest tells without the key.
	contentOnly := func(key string) bool {
		return encrypted.DefaultEncrypt(key) && !strings.HasPrefix(key, savepoint.LabelPrefix)
	}
	mixed := memstore.New()
	if err := checkpoint.CopySavepoint(ctx, enc, wrap(t, mixed, k1, contentOnly), "sp"); err != nil {
		t.Fatal(err)
	}
	check("content encrypted", wrap(t, mixed, k1, contentOnly), k1.ID)
	if info, err := savepoint.Stat(ctx, mixed, "sp"); err != nil || info.EncryptionKeyID != k1.ID {
		t.Fatalf("Stat without the key: %q, %v; want %s", info.EncryptionKeyID, err, k1.ID)
	}
	for _, c := range []struct {
		name string
		bs   blobstore.Blobstore
		want error
		ids  []string
	}{
		{"without a key", encrypted.Detect(mixed, encrypted.Options{}), encrypted.ErrNoKey, []string{k1.ID}},
		{"with another key", wrap(t, mixed, k2, contentOnly), encrypted.ErrWrongKey, []string{k1.ID, k2.ID}},
	} {
		_, err := savepoint.Open(ctx, c.bs, "sp", savepoint.Options{})
		if !errors.Is(err, c.want) {
			t.Fatalf("Open %s: %v, want %v", c.name, err, c.want)
		}
		for _, id := range c.ids {
			if !strings.Contains(err.Error(), id) {
				t.Errorf("Open %s: %q does not name %s", c.name, err, id)
			}
		}
		dst := memstore.New()
		if _, err := checkpoint.RestoreSavepoint(ctx, blobstorage.New(dst, t.TempDir(), blobstorage.Options{}), c.bs, "sp"); !errors.Is(err, c.want) {
			t.Fatalf("RestoreSavepoint %s: %v, want %v", c.name, err, c.want)
		}
		if keys := blobstoretest.ListKeys(t, dst, ""); len(keys) != 0 {
			t.Errorf("RestoreSavepoint %s wrote %v", c.name, keys)
		}
		if locks := blobstoretest.ListKeys(t, mixed, savepoint.LockPrefix); len(locks) != 0 {
			t.Errorf("Open %s left locks %v", c.name, locks)
		}
	}
}
