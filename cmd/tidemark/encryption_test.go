package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidemark-io/tidemark/blobstore/encrypted"
)

func writeKey(t *testing.T, seed byte) (path string, k encrypted.Key) {
	t.Helper()
	material := bytes.Repeat([]byte{seed}, encrypted.KeySize)
	path = filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(path, []byte(base64.StdEncoding.EncodeToString(material)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	k, err := encrypted.NewKey("", material)
	if err != nil {
		t.Fatal(err)
	}
	return path, k
}

// A demo on a store opened with ?encryption_key_file= writes its state
// files and savepoints encrypted: verify passes with the key, fails
// naming the key id without it and both key ids with another; records stay readable
// without the key; savepoint cp decrypts into a plain store.
func TestEncryptedStoreDemoVerify(t *testing.T) {
	dir := t.TempDir()
	plainURL := fileURL(filepath.Join(dir, "store"))
	keyPath, key := writeKey(t, 1)
	otherPath, other := writeKey(t, 2)
	store := plainURL + "?encryption_key_file=" + keyPath
	out := must(t, "", demoArgs(t.TempDir(), store)...)
	if !strings.Contains(out, "exactly-once: OK") {
		t.Fatalf("demo on an encrypted store: %q", out)
	}
	must(t, store, "savepoint", "create", "sp")
	for _, name := range []string{"sp", "latest-completed"} {
		must(t, store, "verify", name)
		if _, errOut, code := tm(t, plainURL, "verify", name); code == exitOK || !strings.Contains(errOut, key.ID) {
			t.Fatalf("verify %s without the key: exit %d, stderr %q; want a failure naming %s", name, code, errOut, key.ID)
		}
		_, errOut, code := tm(t, plainURL+"?encryption_key_file="+otherPath, "verify", name)
		if code == exitOK || !strings.Contains(errOut, key.ID) || !strings.Contains(errOut, other.ID) {
			t.Fatalf("verify %s with another key: exit %d, stderr %q; want a failure naming %s and %s", name, code, errOut, key.ID, other.ID)
		}
	}
	// The key from the environment works the same; records are plain.
	vars := map[string]string{storeEnv: plainURL, keyEnv: base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 32))}
	if _, errOut, code := tmEnv(t, vars, "verify", "sp"); code != exitOK {
		t.Fatalf("verify with $%s: exit %d: %s", keyEnv, code, errOut)
	}
	must(t, plainURL, "show", "latest-completed")
	// The savepoint object itself holds no tar header in the clear.
	rc, err := openURL(t, plainURL).Get(t.Context(), "savepoints/sp")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || bytes.Contains(raw, []byte("MANIFEST")) || !bytes.HasPrefix(raw, []byte("TMKENC")) {
		t.Fatalf("the stored savepoint is not encrypted (%v)", err)
	}
	// cp to a plain store, with encryption=off overriding the environment.
	plainDst := fileURL(filepath.Join(dir, "plain"))
	if _, errOut, code := tmEnv(t, vars, "savepoint", "cp", "sp", plainURL, plainDst+"?encryption=off"); code != exitOK {
		t.Fatalf("savepoint cp to a plain store: exit %d: %s", code, errOut)
	}
	must(t, plainDst, "verify", "sp")
	// cp to a store under another key: verifies with that key only.
	otherPlain := fileURL(filepath.Join(dir, "other"))
	otherDst := otherPlain + "?encryption_key_file=" + otherPath
	must(t, "", "savepoint", "cp", "sp", store, otherDst)
	must(t, otherDst, "verify", "sp")
	if _, errOut, code := tm(t, "", "savepoint", "cp", "sp", otherPlain, fileURL(filepath.Join(dir, "plain2"))); code == exitOK || !strings.Contains(errOut, other.ID) {
		t.Fatalf("cp from the other key's store with no key: exit %d, stderr %q; want a failure naming %s", code, errOut, other.ID)
	}
	// A restore without the key is refused naming it; with it, it runs.
	fresh := fileURL(filepath.Join(dir, "fresh"))
	if _, errOut, code := tm(t, fresh, "savepoint", "restore", "sp", "--from", plainURL); code == exitOK || !strings.Contains(errOut, key.ID) {
		t.Fatalf("savepoint restore without the key: exit %d, stderr %q; want a failure naming %s", code, errOut, key.ID)
	}
	must(t, fresh, "savepoint", "restore", "sp", "--from", store)
	must(t, fresh, "verify", "latest-completed")
}

// A key file that is missing or of the wrong length, or a bad encryption
// parameter, is a usage error.
func TestEncryptionKeyUsageErrors(t *testing.T) {
	dir := t.TempDir()
	short := filepath.Join(dir, "short")
	if err := os.WriteFile(short, []byte("0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	store := fileURL(filepath.Join(dir, "store"))
	for _, u := range []string{
		store + "?encryption_key_file=" + filepath.Join(dir, "missing"),
		store + "?encryption_key_file=" + short,
		store + "?encryption_key_file=",
		store + "?encryption=maybe",
		store + "?encryption=off&encryption_key_file=" + short,
	} {
		if _, errOut, code := tm(t, u, "ls"); code != exitUsage {
			t.Errorf("ls on %s: exit %d, want %d\n%s", u, code, exitUsage, errOut)
		}
	}
	vars := map[string]string{storeEnv: store, keyEnv: "not base64!"}
	if _, errOut, code := tmEnv(t, vars, "ls"); code != exitUsage || !strings.Contains(errOut, keyEnv) {
		t.Errorf("ls with a bad $%s: exit %d, want %d naming it\n%s", keyEnv, code, exitUsage, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "store")); !os.IsNotExist(err) {
		t.Errorf("a refused command created the store: %v", err)
	}
}

// The key id is recorded where an operator sees it without the key: show
// prints the record's, savepoint ls (with the key) the manifest's. A
// plain savepoint and an encrypted one both verify (and --deep) and copy
// both ways. A savepoint restore into a store with checkpoints, from a
// source without the key or with another, is refused naming the key id
// and changes nothing in the store.
func TestEncryptionKeyIDRecordedAndPlainSavepointsCopy(t *testing.T) {
	dir := t.TempDir()
	encDir, plainDir := filepath.Join(dir, "enc"), filepath.Join(dir, "plain")
	keyPath, key := writeKey(t, 3)
	otherPath, other := writeKey(t, 4)
	encPlainURL := fileURL(encDir)
	enc := encPlainURL + "?encryption_key_file=" + keyPath
	plain := fileURL(plainDir)
	must(t, "", demoArgs(t.TempDir(), enc)...)
	must(t, "", demoArgs(t.TempDir(), plain)...)
	must(t, enc, "savepoint", "create", "e")
	must(t, plain, "savepoint", "create", "p")

	// show, without the key: the record names it; a plain one does not.
	if out := must(t, encPlainURL, "show", "latest-completed"); !strings.Contains(out, "key id "+key.ID) {
		t.Fatalf("show of an encrypted checkpoint does not name key id %s:\n%s", key.ID, out)
	}
	out := must(t, encPlainURL, "show", "latest-completed", "--output", "json")
	var doc map[string]any
	if err := json.Unmarshal([]byte(out), &doc); err != nil || doc["encryption_key_id"] != key.ID {
		t.Fatalf("show --output json: encryption_key_id %v (%v), want %s", doc["encryption_key_id"], err, key.ID)
	}
	if out := must(t, plain, "show", "latest-completed"); strings.Contains(out, "key id") {
		t.Fatalf("show of a plain checkpoint names a key:\n%s", out)
	}

	// Both kinds copy both ways, and verify wherever they land.
	must(t, "", "savepoint", "cp", "p", plain, enc)
	must(t, "", "savepoint", "cp", "e", enc, plain)
	for _, c := range []struct{ store, label string }{{enc, "e"}, {enc, "p"}, {plain, "e"}, {plain, "p"}} {
		must(t, c.store, "verify", c.label)
		must(t, c.store, "verify", "--deep", c.label)
	}
	if out := must(t, enc, "savepoint", "ls"); !strings.Contains(out, "KEY ID") || strings.Count(out, key.ID) != 2 {
		t.Fatalf("savepoint ls of the encrypted store does not show key id %s for both:\n%s", key.ID, out)
	}
	if out := must(t, plain, "savepoint", "ls"); strings.Contains(out, "KEY ID") {
		t.Fatalf("savepoint ls of a plain store shows a key column:\n%s", out)
	}

	// A refused restore changes nothing in the store restored into.
	before := treeOf(t, plainDir)
	for _, from := range []string{encPlainURL, encPlainURL + "?encryption_key_file=" + otherPath} {
		_, errOut, code := tm(t, plain, "savepoint", "restore", "e", "--from", from)
		if code == exitOK || !strings.Contains(errOut, key.ID) {
			t.Fatalf("savepoint restore from %s: exit %d, stderr %q; want a refusal naming %s", from, code, errOut, key.ID)
		}
		if strings.Contains(from, otherPath) && !strings.Contains(errOut, other.ID) {
			t.Errorf("savepoint restore with another key: %q does not name %s", errOut, other.ID)
		}
		if after := treeOf(t, plainDir); !maps.Equal(before, after) {
			t.Fatalf("a refused savepoint restore from %s changed the store", from)
		}
	}
	must(t, plain, "savepoint", "restore", "e", "--from", enc, "--new-job")
	must(t, plain, "verify", "latest-completed")
}
