package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/tidemark-io/tidemark/blobstorage"
)

// oneJSONDocument decodes out as exactly one JSON document.
func oneJSONDocument(t *testing.T, what, out string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	var v map[string]any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%s: stdout is not a JSON document: %v\n%s", what, err, out)
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		t.Fatalf("%s: stdout holds more than one JSON document (%v)\n%s", what, err, out)
	}
	return v
}

func TestVerifyJSONIsOneDocumentWhateverTheVerdict(t *testing.T) {
	store := ranDemo(t)
	var show struct {
		Files map[string][]blobstorage.FileRef `json:"files"`
	}
	mustJSON(t, store, &show, "show", "latest-completed")
	out, _, code := tm(t, store, "verify", "latest-completed", "--output", "json")
	if v := oneJSONDocument(t, "verify of a good checkpoint", out); code != 0 || v["ok"] != true {
		t.Fatalf("verify of a good checkpoint: exit %d, %v", code, v)
	}
	bs := openURL(t, store)
	victim := show.Files["counts"][0].Key
	if err := bs.Put(t.Context(), victim, bytes.NewReader([]byte("not the state"))); err != nil {
		t.Fatal(err)
	}
	out, _, code = tm(t, store, "verify", "latest-completed", "--output", "json")
	if v := oneJSONDocument(t, "verify of a corrupt checkpoint", out); code != exitVerify || v["ok"] != false || !strings.Contains(v["error"].(string), victim) {
		t.Fatalf("verify of a corrupt checkpoint: exit %d, %v; want %d, ok false, the error naming %s", code, v, exitVerify, victim)
	}
	// Not a verdict but a failure: still one document, ok false, and the
	// exit code says which.
	out, _, code = tm(t, store, "verify", "no-such-savepoint", "--output", "json")
	if v := oneJSONDocument(t, "verify of a name the store lacks", out); code == 0 || code == exitVerify || v["ok"] != false || v["error"] == "" {
		t.Fatalf("verify of a name the store lacks: exit %d, %v; want a failure other than %d, ok false, an error", code, v, exitVerify)
	}
}
