package archive

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

// testState is the content of two owners' state directories: nested
// directories, empty files, a long non-ASCII path and a file of a few MiB.
func testState() map[string]map[string][]byte {
	big := make([]byte, 3<<20+17)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range big {
		if i%4096 < 2048 {
			big[i] = byte(rng.Uint32()) // half random, half compressible
		}
	}
	long := strings.Repeat("deep/", 30) + "ünïcode-file"
	return map[string]map[string][]byte{
		"op1": {
			"000001.sst":  big,
			"MANIFEST-01": []byte("manifest"),
			"OPTIONS":     {},
			"wal/000002":  []byte("wal record"),
			long:          []byte("far down"),
		},
		"op2": {
			"a/b/c/empty": {},
			"a/b/d":       []byte("d"),
		},
	}
}

// makeStateDirs writes testState into base/<owner>/... and returns base.
func makeStateDirs(t testing.TB) string {
	t.Helper()
	base := t.TempDir()
	for owner, files := range testState() {
		for rel, content := range files {
			p := filepath.Join(base, owner, filepath.FromSlash(rel))
			mustNoErr(t, os.MkdirAll(filepath.Dir(p), 0o755))
			mustNoErr(t, os.WriteFile(p, content, 0o644))
		}
	}
	mustNoErr(t, os.MkdirAll(filepath.Join(base, "op2", "empty-dir"), 0o755))
	return base
}

// testManifest hashes the state dirs under base as the checkpoint engine
// would, and returns the manifest and an opener for Write.
func testManifest(t testing.TB, base string) (*Manifest, OpenFunc) {
	t.Helper()
	ctx := context.Background()
	m := &Manifest{Version: FormatVersion, Record: json.RawMessage(testRecord)}
	openers := map[string]OpenFunc{}
	for _, owner := range []string{"op1", "op2"} {
		prefix := StatePrefix + owner
		files, err := DirFiles(ctx, filepath.Join(base, owner), prefix)
		mustNoErr(t, err)
		m.Files = append(m.Files, files...)
		openers[prefix+"/"] = DirOpener(filepath.Join(base, owner), prefix)
	}
	open := func(ctx context.Context, p string) (io.ReadCloser, error) {
		for prefix, o := range openers {
			if strings.HasPrefix(p, prefix) {
				return o(ctx, p)
			}
		}
		return nil, fs.ErrNotExist
	}
	return m, open
}

func writeTestArchive(t testing.TB, compress bool) []byte {
	t.Helper()
	m, open := testManifest(t, makeStateDirs(t))
	var buf bytes.Buffer
	mustNoErr(t, Write(context.Background(), &buf, m, open, WriteOptions{Compress: compress}))
	return buf.Bytes()
}

func TestWriteThenExtractRoundTrips(t *testing.T) {
	for _, compress := range []bool{false, true} {
		t.Run(fmt.Sprintf("compress=%v", compress), func(t *testing.T) {
			ctx := context.Background()
			m, open := testManifest(t, makeStateDirs(t))
			var buf bytes.Buffer
			mustNoErr(t, Write(ctx, &buf, m, open, WriteOptions{Compress: compress}))
			if got := bytes.HasPrefix(buf.Bytes(), zstdMagic); got != compress {
				t.Fatalf("starts with zstd magic = %v, want %v", got, compress)
			}

			dir := filepath.Join(t.TempDir(), "restored")
			got, err := ExtractDir(ctx, bytes.NewReader(buf.Bytes()), dir, Limits{})
			mustNoErr(t, err)
			if !reflect.DeepEqual(got.Files, m.Files) || got.Version != FormatVersion {
				t.Errorf("manifest = %+v, want files %+v", got, m.Files)
			}
			if string(got.Record) != testRecord {
				t.Errorf("record = %s, want %s", got.Record, testRecord)
			}

			// Exactly the state files, with their content.
			want := map[string][]byte{}
			for owner, files := range testState() {
				for rel, c := range files {
					want[StatePrefix+owner+"/"+rel] = c
				}
			}
			gotFiles := map[string][]byte{}
			mustNoErr(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				rel, _ := filepath.Rel(dir, p)
				b, err := os.ReadFile(p)
				gotFiles[filepath.ToSlash(rel)] = b
				return err
			}))
			if len(gotFiles) != len(want) {
				t.Errorf("extracted %d files, want %d", len(gotFiles), len(want))
			}
			for p, c := range want {
				if !bytes.Equal(gotFiles[p], c) {
					t.Errorf("%s: %d bytes differ from the %d written", p, len(gotFiles[p]), len(c))
				}
			}
			// No temporary directory left next to dir.
			ents, err := os.ReadDir(filepath.Dir(dir))
			mustNoErr(t, err)
			if len(ents) != 1 {
				t.Errorf("parent holds %d entries, want only %s", len(ents), filepath.Base(dir))
			}
		})
	}
}

func TestReadStreamsEveryFileInManifestOrder(t *testing.T) {
	data := writeTestArchive(t, true)
	var seen []string
	m, err := Read(context.Background(), bytes.NewReader(data), Limits{}, func(f File, r io.Reader) error {
		b, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		if int64(len(b)) != f.Size {
			return fmt.Errorf("%s: read %d bytes, want %d", f.Path, len(b), f.Size)
		}
		seen = append(seen, f.Path)
		return nil
	})
	mustNoErr(t, err)
	var want []string
	for _, f := range m.Files {
		want = append(want, f.Path)
	}
	if !reflect.DeepEqual(seen, want) {
		t.Errorf("fn saw %v, want %v", seen, want)
	}
}

func TestWriteIsDeterministic(t *testing.T) {
	base := makeStateDirs(t)
	for _, compress := range []bool{false, true} {
		var a, b bytes.Buffer
		m, open := testManifest(t, base)
		mustNoErr(t, Write(context.Background(), &a, m, open, WriteOptions{Compress: compress}))
		mustNoErr(t, Write(context.Background(), &b, m, open, WriteOptions{Compress: compress}))
		if !bytes.Equal(a.Bytes(), b.Bytes()) {
			t.Errorf("compress=%v: two writes of the same checkpoint differ", compress)
		}
	}
}

func TestEmptyArchiveRoundTrips(t *testing.T) {
	ctx := context.Background()
	var buf bytes.Buffer
	m := &Manifest{Version: FormatVersion, Record: json.RawMessage(`{}`)}
	mustNoErr(t, Write(ctx, &buf, m, nil, WriteOptions{}))
	if !strings.Contains(buf.String(), `"files":[]`) {
		t.Errorf("manifest does not spell an empty file list as []")
	}
	dir := filepath.Join(t.TempDir(), "d")
	got, err := ExtractDir(ctx, &buf, dir, Limits{})
	mustNoErr(t, err)
	if len(got.Files) != 0 {
		t.Errorf("files = %v", got.Files)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Errorf("dir not created: %v", err)
	}
}

func TestWriteRefusesSourceThatDisagreesWithManifest(t *testing.T) {
	content := []byte("hello")
	good := fileOf("state/a/f", content)
	for _, c := range []struct {
		name   string
		source string
	}{
		{"different content", "jello"},
		{"shorter", "hell"},
		{"longer", "hello!"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := &Manifest{Version: FormatVersion, Record: json.RawMessage(`{}`), Files: []File{good}}
			open := func(context.Context, string) (io.ReadCloser, error) {
				return io.NopCloser(strings.NewReader(c.source)), nil
			}
			err := Write(context.Background(), io.Discard, m, open, WriteOptions{})
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), `"state/a/f"`) {
				t.Fatalf("got %v, want ErrCorrupt naming state/a/f", err)
			}
		})
	}
}

func TestWriteRefusesManifestThatReadWouldRefuse(t *testing.T) {
	for _, c := range []struct {
		name string
		m    Manifest
	}{
		{"bad path", Manifest{Version: 1, Record: json.RawMessage(`{}`), Files: []File{fileOf("state/a/../x", nil)}}},
		{"wrong version", Manifest{Version: 7, Record: json.RawMessage(`{}`)}},
		{"no record", Manifest{Version: 1}},
		{"invalid record", Manifest{Version: 1, Record: json.RawMessage(`{"a":`)}},
		{"duplicate", Manifest{Version: 1, Record: json.RawMessage(`{}`), Files: []File{fileOf("state/a/x", nil), fileOf("state/a/x", nil)}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := Write(context.Background(), &buf, &c.m, nil, WriteOptions{})
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("got %v, want ErrCorrupt", err)
			}
			if buf.Len() != 0 {
				t.Errorf("wrote %d bytes before refusing", buf.Len())
			}
		})
	}
}

func TestWriteReturnsOpenErrors(t *testing.T) {
	boom := errors.New("boom")
	m := &Manifest{Version: 1, Record: json.RawMessage(`{}`), Files: []File{fileOf("state/a/x", nil)}}
	err := Write(context.Background(), io.Discard, m, func(context.Context, string) (io.ReadCloser, error) { return nil, boom }, WriteOptions{})
	if !errors.Is(err, boom) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("got %v, want boom and not ErrCorrupt", err)
	}
}

func TestDirFilesHashesEveryRegularFileSorted(t *testing.T) {
	dir := t.TempDir()
	mustNoErr(t, os.MkdirAll(filepath.Join(dir, "z", "y"), 0o755))
	mustNoErr(t, os.WriteFile(filepath.Join(dir, "z", "y", "1"), []byte("one"), 0o644))
	mustNoErr(t, os.WriteFile(filepath.Join(dir, "b"), nil, 0o644))
	mustNoErr(t, os.WriteFile(filepath.Join(dir, "a"), []byte("aa"), 0o644))
	got, err := DirFiles(context.Background(), dir, "state/op/")
	mustNoErr(t, err)
	want := []File{fileOf("state/op/a", []byte("aa")), fileOf("state/op/b", nil), fileOf("state/op/z/y/1", []byte("one"))}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}

func TestDirFilesRefusesSymlinks(t *testing.T) {
	dir := t.TempDir()
	mustNoErr(t, os.WriteFile(filepath.Join(dir, "a"), nil, 0o644))
	mustNoErr(t, os.Symlink("a", filepath.Join(dir, "link")))
	if _, err := DirFiles(context.Background(), dir, "state/op"); err == nil || !strings.Contains(err.Error(), "link") {
		t.Fatalf("got %v, want an error naming the symlink", err)
	}
}

func TestDirFilesRefusesPathsReadWouldRefuse(t *testing.T) {
	dir := t.TempDir()
	mustNoErr(t, os.WriteFile(filepath.Join(dir, `a\b`), nil, 0o644))
	if _, err := DirFiles(context.Background(), dir, "state/op"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("got %v, want ErrCorrupt for a backslash", err)
	}
	if _, err := DirFiles(context.Background(), t.TempDir(), "elsewhere"); err != nil {
		t.Fatalf("empty dir: %v", err) // nothing to name, nothing to refuse
	}
}

func TestExtractDirIntoExistingEmptyDir(t *testing.T) {
	dir := t.TempDir()
	_, err := ExtractDir(context.Background(), bytes.NewReader(goodArchive()), dir, Limits{})
	mustNoErr(t, err)
	if b, err := os.ReadFile(filepath.Join(dir, "state", "op1", "000001.sst")); err != nil || string(b) != "alpha" {
		t.Fatalf("got %q, %v", b, err)
	}
}

func TestExtractDirRefusesNonEmptyDestination(t *testing.T) {
	dir := t.TempDir()
	keep := filepath.Join(dir, "keep")
	mustNoErr(t, os.WriteFile(keep, []byte("mine"), 0o644))
	_, err := ExtractDir(context.Background(), bytes.NewReader(goodArchive()), dir, Limits{})
	if !errors.Is(err, fs.ErrExist) {
		t.Fatalf("got %v, want fs.ErrExist", err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("destination changed: %d entries", len(ents))
	}
	ents, _ = os.ReadDir(filepath.Dir(dir))
	if len(ents) != 1 {
		t.Errorf("parent holds %d entries, want just the destination", len(ents))
	}
	if _, err := ExtractDir(context.Background(), bytes.NewReader(goodArchive()), keep, Limits{}); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("destination is a file: got %v, want fs.ErrExist", err)
	}
}

func TestReadReportsDigestMismatchInPlaceOfEOF(t *testing.T) {
	f := fileOf("state/a/x", []byte("alpha"))
	data := rawTar(reg(ManifestName, manifestOf(f)), reg("state/a/x", []byte("alphA")))
	var fnErr error
	_, err := Read(context.Background(), bytes.NewReader(data), Limits{}, func(f File, r io.Reader) error {
		_, fnErr = io.ReadAll(r)
		return fnErr
	})
	if !errors.Is(fnErr, ErrCorrupt) {
		t.Errorf("fn's reader returned %v at the end, want ErrCorrupt", fnErr)
	}
	if !errors.Is(err, ErrCorrupt) {
		t.Errorf("Read returned %v, want ErrCorrupt", err)
	}
}

func TestReadDrainsAndChecksWhatFnDidNotRead(t *testing.T) {
	f := fileOf("state/a/x", []byte("alpha"))
	data := rawTar(reg(ManifestName, manifestOf(f)), reg("state/a/x", []byte("alphA")))
	_, err := Read(context.Background(), bytes.NewReader(data), Limits{}, func(File, io.Reader) error { return nil })
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), `"state/a/x"`) {
		t.Fatalf("got %v, want ErrCorrupt naming state/a/x", err)
	}
}

func TestReadReturnsFnErrorsAsTheyAre(t *testing.T) {
	boom := errors.New("disk full")
	_, err := Read(context.Background(), bytes.NewReader(goodArchive()), Limits{}, func(File, io.Reader) error { return boom })
	if !errors.Is(err, boom) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("got %v, want the fn error and not ErrCorrupt", err)
	}
}

func TestReadDoesNotCallSourceFailuresCorruption(t *testing.T) {
	boom := errors.New("connection reset")
	for _, data := range [][]byte{writeTestArchive(t, false), writeTestArchive(t, true)} {
		for _, cut := range []int{0, 100, 600, 5000, len(data) / 2} {
			r := io.MultiReader(bytes.NewReader(data[:cut]), iotest.ErrReader(boom))
			_, err := Verify(context.Background(), r, Limits{})
			if !errors.Is(err, boom) || errors.Is(err, ErrCorrupt) {
				t.Errorf("cut at %d: got %v, want the source error and not ErrCorrupt", cut, err)
			}
		}
	}
}

func TestReadStopsWhenContextIsCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	data := writeTestArchive(t, false)
	_, err := Read(ctx, bytes.NewReader(data), Limits{}, func(f File, r io.Reader) error {
		cancel()
		_, err := io.Copy(io.Discard, r)
		return err
	})
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("got %v, want context.Canceled and not ErrCorrupt", err)
	}
	base := t.TempDir()
	dir := filepath.Join(base, "p", "d")
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if _, err := ExtractDir(ctx, bytes.NewReader(data), dir, Limits{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("ExtractDir: got %v, want context.Canceled", err)
	}
	assertNothingExtracted(t, base, dir)
}

func TestWriteStopsWhenContextIsCancelled(t *testing.T) {
	m, open := testManifest(t, makeStateDirs(t))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Write(ctx, io.Discard, m, open, WriteOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

func TestWriteRefusesWhatReadersWithItsLimitsWouldRefuse(t *testing.T) {
	// Whatever Write accepts reads back: a manifest over the readers'
	// limits is refused before a byte is written, not discovered on
	// restore.
	x := fileOf("state/a/x", []byte("alpha"))
	y := fileOf("state/a/y", []byte("bravo"))
	m := &Manifest{Version: FormatVersion, Record: json.RawMessage(testRecord), Files: []File{x, y}}
	for _, lim := range []Limits{{MaxFiles: 1}, {MaxTotalBytes: 9}, {MaxManifestBytes: 100}} {
		var buf bytes.Buffer
		err := Write(t.Context(), &buf, m, nil, WriteOptions{Limits: lim})
		if !errors.Is(err, ErrTooLarge) || !errors.Is(err, ErrCorrupt) {
			t.Errorf("%+v: got %v, want ErrTooLarge", lim, err)
		}
		if buf.Len() != 0 {
			t.Errorf("%+v: wrote %d bytes before refusing", lim, buf.Len())
		}
	}
	bad := &Manifest{Version: FormatVersion, Record: json.RawMessage("{\"id\":\"\xff\"}")}
	if err := Write(t.Context(), io.Discard, bad, nil, WriteOptions{}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("record of invalid UTF-8: got %v, want ErrCorrupt", err)
	}
}

func TestWriteReadRoundTripsOddNames(t *testing.T) {
	// Whatever Write accepts, the strict manifest decoder reads back
	// exactly: names with characters json.Marshal escapes (quotes, <>&,
	// U+2028, non-ASCII, astral runes) and records of any shape.
	rng := rand.New(rand.NewPCG(7, 11))
	alphabet := []rune("aZ09 -_.~'\"<>&%+=,;!()[]{}é中\u2028\u2029😀\u00a0")
	name := func() string {
		var b strings.Builder
		for range 1 + rng.IntN(12) {
			b.WriteRune(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
	total := 0
	for round := range 40 {
		seen := map[string]bool{}
		m := &Manifest{Version: FormatVersion, Record: json.RawMessage(fmt.Sprintf(`{"id":%q,"n":[1,2.5,-3e2,true,null,{"k":"\u00e9\\n"}]}`, name()))}
		contents := map[string][]byte{}
		for range rng.IntN(8) {
			p := StatePrefix + name() + "/" + name()
			if rng.IntN(2) == 0 {
				p += "/" + name()
			}
			if ValidatePath(p) != nil || seen[p] {
				continue
			}
			seen[p] = true
			c := []byte(name())
			contents[p] = c
			m.Files = append(m.Files, fileOf(p, c))
		}
		if checkLayout(m.Files) != nil {
			continue // a path that is also another's directory
		}
		open := func(_ context.Context, p string) (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(contents[p])), nil
		}
		total += len(m.Files)
		var buf bytes.Buffer
		mustNoErr(t, Write(t.Context(), &buf, m, open, WriteOptions{Compress: round%2 == 1}))
		got, err := Verify(t.Context(), bytes.NewReader(buf.Bytes()), Limits{})
		if err != nil {
			t.Fatalf("round %d: %v\nmanifest files %+v", round, err, m.Files)
		}
		if len(got.Files) != len(m.Files) || (len(m.Files) > 0 && !reflect.DeepEqual(got.Files, m.Files)) {
			t.Fatalf("round %d: files %+v, want %+v", round, got.Files, m.Files)
		}
		var want bytes.Buffer
		mustNoErr(t, json.Compact(&want, m.Record))
		var gotRec bytes.Buffer
		mustNoErr(t, json.Compact(&gotRec, got.Record))
		var a, b any
		mustNoErr(t, json.Unmarshal(want.Bytes(), &a))
		mustNoErr(t, json.Unmarshal(gotRec.Bytes(), &b))
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("round %d: record %s, want %s", round, got.Record, m.Record)
		}
	}
	if total < 60 {
		t.Fatalf("only %d files round-tripped; the generator is too strict", total)
	}
}
