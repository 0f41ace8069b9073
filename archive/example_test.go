package archive_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/tidemark-io/tidemark/archive"
)

// Archive one owner's state directory with its checkpoint record, then
// extract it somewhere else.
func Example() {
	ctx := context.Background()
	tmp, err := os.MkdirTemp("", "archive-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	stateDir := filepath.Join(tmp, "op1")
	os.MkdirAll(filepath.Join(stateDir, "wal"), 0o755)
	os.WriteFile(filepath.Join(stateDir, "000001.sst"), []byte("sorted strings"), 0o644)
	os.WriteFile(filepath.Join(stateDir, "wal", "000002.log"), []byte("log"), 0o644)

	// Hash the files, then stream them into a compressed archive; Write
	// checks every byte against the manifest as it copies.
	prefix := archive.StatePrefix + "op1"
	files, err := archive.DirFiles(ctx, stateDir, prefix)
	if err != nil {
		log.Fatal(err)
	}
	m := &archive.Manifest{
		Version: archive.FormatVersion,
		Record:  json.RawMessage(`{"id":"0000000007"}`),
		Files:   files,
	}
	var buf bytes.Buffer // a Blobstore upload in real use
	if err := archive.Write(ctx, &buf, m, archive.DirOpener(stateDir, prefix), archive.WriteOptions{Compress: true}); err != nil {
		log.Fatal(err)
	}

	// Extract: nothing appears under dest unless the whole archive verifies.
	dest := filepath.Join(tmp, "restored")
	got, err := archive.ExtractDir(ctx, &buf, dest, archive.Limits{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("record:", string(got.Record))
	for _, f := range got.Files {
		b, _ := os.ReadFile(filepath.Join(dest, filepath.FromSlash(f.Path)))
		fmt.Printf("%s %d bytes %q\n", f.Path, f.Size, b)
	}
	// Output:
	// record: {"id":"0000000007"}
	// state/op1/000001.sst 14 bytes "sorted strings"
	// state/op1/wal/000002.log 3 bytes "log"
}
