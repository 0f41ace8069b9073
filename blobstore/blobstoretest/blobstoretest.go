// Package blobstoretest is the Blobstore contract in code: a conformance
// suite that every implementation runs unchanged.
//
// A store is done when it passes Run:
//
//	func TestConformance(t *testing.T) {
//		blobstoretest.Run(t, func(t *testing.T) blobstore.Blobstore {
//			return mystore.New(t.TempDir())
//		}, blobstoretest.Options{})
//	}
//
// open is called once per subtest and must return an empty store that no
// other subtest uses.
//
// # Helpers
//
// A store's own tests can use the suite's test data: [InvalidKeys] and
// [LongestKey] for the key rules, [Payload] for reproducible contents and
// [Stream] for a reader the store can neither seek nor measure.
package blobstoretest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstore"
)

// Options tunes the suite for a store.
type Options struct {
	// LargeSize is the size of the "large" objects, which should be
	// several times a store's multipart part size so that multipart paths
	// are exercised. Default 3 MiB + 17 bytes.
	LargeSize int64
	// ListKeys is how many keys the paging test writes. Default 2,600
	// (more than two S3 pages of 1,000).
	ListKeys int
	// Racers is how many goroutines race a conditional write. Default 16.
	Racers int
	// MaxKeyLen is the longest key the store accepts: MaxKeyLen for
	// plain stores, less for a store under a prefix. Default
	// blobstore.MaxKeyLen.
	MaxKeyLen int
}

func (o *Options) defaults() {
	if o.LargeSize == 0 {
		o.LargeSize = 3<<20 + 17
	}
	if o.ListKeys == 0 {
		o.ListKeys = 2600
	}
	if o.Racers == 0 {
		o.Racers = 16
	}
	if o.MaxKeyLen == 0 {
		o.MaxKeyLen = blobstore.MaxKeyLen
	}
}

// Run runs the conformance suite. open returns a fresh, empty store for
// each subtest; the subtests run in parallel (t.Parallel), so open must
// be safe to call concurrently.
func Run(t *testing.T, open func(t *testing.T) blobstore.Blobstore, opts Options) {
	opts.defaults()
	s := &suite{open: open, opts: opts}
	p := &parallel{T: t}
	p.Run("RoundTrip", s.testRoundTrip)
	p.Run("Overwrite", s.testOverwrite)
	p.Run("Missing", s.testMissing)
	p.Run("InvalidKeys", s.testInvalidKeys)
	p.Run("ValidUnusualKeys", s.testValidUnusualKeys)
	p.Run("GetRange", s.testGetRange)
	p.Run("Stat", s.testStat)
	p.Run("GetWithInfo", s.testGetWithInfo)
	p.Run("ListOrderAndPaging", s.testListOrderAndPaging)
	p.Run("ListPrefixSemantics", s.testListPrefixSemantics)
	p.Run("ListInvalidPrefix", s.testListInvalidPrefix)
	p.Run("ListStopEarly", s.testListStopEarly)
	p.Run("PutIfAbsent", s.testPutIfAbsent)
	p.Run("PutIfMatch", s.testPutIfMatch)
	p.Run("PutIfMatchRace", s.testPutIfMatchRace)
	p.Run("PutIfAbsentRace", s.testPutIfAbsentRace)
	p.Run("PutReaderFails", s.testPutReaderFails)
	p.Run("PutContextCancelled", s.testPutContextCancelled)
	p.Run("ContextCancelled", s.testContextCancelled)
	p.Run("Delete", s.testDelete)
}

// parallel runs each subtest of Run in parallel with the others.
type parallel struct{ *testing.T }

func (p *parallel) Run(name string, f func(t *testing.T)) bool {
	return p.T.Run(name, func(t *testing.T) {
		t.Parallel()
		f(t)
	})
}

type suite struct {
	open func(t *testing.T) blobstore.Blobstore
	opts Options
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// Payload returns n pseudo-random bytes, the same for the same seed in
// every run and different per seed, so that a test can write data no store
// compresses or deduplicates and still know what to expect back.
func Payload(seed uint64, n int64) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// onlyReader hides every interface but io.Reader (no Seek, no Len, no
// WriterTo), so stores see a stream of unknown length, as they would
// from a pipe.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

// Stream returns a reader of b that hides every interface but io.Reader,
// so that a store sees a stream of unknown length that it cannot seek, as
// from a pipe, and must take its streaming path.
func Stream(b []byte) io.Reader { return onlyReader{bytes.NewReader(b)} }

func mustPut(t *testing.T, bs blobstore.Blobstore, key string, b []byte) {
	t.Helper()
	if err := bs.Put(ctxFor(t), key, Stream(b)); err != nil {
		t.Fatalf("Put(%q, %d bytes): %v", key, len(b), err)
	}
}

func mustGet(t *testing.T, bs blobstore.Blobstore, key string) []byte { return Get(t, bs, key) }

// Get returns the content of the object at key, failing t if it cannot
// be read.
func Get(t testing.TB, bs blobstore.Blobstore, key string) []byte {
	t.Helper()
	rc, err := bs.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("Get(%q): read: %v", key, err)
	}
	return b
}

func sameBytes(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: got %d bytes (sha256 %x), want %d bytes (sha256 %x)",
			what, len(got), sha256.Sum256(got), len(want), sha256.Sum256(want))
	}
}

// ListKeys returns the keys bs lists under prefix, in order, failing the
// test on any error.
func ListKeys(t testing.TB, bs blobstore.Blobstore, prefix string) []string {
	t.Helper()
	var keys []string
	for info, err := range bs.List(t.Context(), prefix) {
		if err != nil {
			t.Fatalf("List(%q): %v", prefix, err)
		}
		keys = append(keys, info.Key)
	}
	return keys
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want one wrapping %v", what, err, target)
	}
}

func (s *suite) testRoundTrip(t *testing.T) {
	bs := s.open(t)
	for _, tc := range []struct {
		name string
		size int64
	}{
		{"empty", 0},
		{"one-byte", 1},
		{"64KiB", 64 << 10},
		{"large", s.opts.LargeSize},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "roundtrip/" + tc.name
			want := Payload(uint64(tc.size)+1, tc.size)
			mustPut(t, bs, key, want)
			sameBytes(t, "Get after Put", mustGet(t, bs, key), want)
			info, err := bs.Stat(ctxFor(t), key)
			if err != nil {
				t.Fatalf("Stat: %v", err)
			}
			if info.Size != tc.size {
				t.Fatalf("Stat size = %d, want %d", info.Size, tc.size)
			}
		})
	}
}

func (s *suite) testOverwrite(t *testing.T) {
	bs := s.open(t)
	ctx := ctxFor(t)
	first, second := Payload(1, s.opts.LargeSize), Payload(2, 10)
	mustPut(t, bs, "k", first)
	info1, err := bs.Stat(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, bs, "k", second)
	sameBytes(t, "Get after overwrite", mustGet(t, bs, "k"), second)
	info2, err := bs.Stat(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if info1.ETag == info2.ETag {
		t.Fatalf("ETag %q did not change when the content changed", info1.ETag)
	}
	if keys := ListKeys(t, bs, ""); !slices.Equal(keys, []string{"k"}) {
		t.Fatalf("List after overwrite = %q, want [k]", keys)
	}
}

func (s *suite) testMissing(t *testing.T) {
	bs := s.open(t)
	ctx := ctxFor(t)
	_, err := bs.Get(ctx, "no/such/key")
	wantErr(t, "Get missing", err, blobstore.ErrNotFound)
	_, err = bs.GetRange(ctx, "no/such/key", 0, 10)
	wantErr(t, "GetRange missing", err, blobstore.ErrNotFound)
	_, err = bs.GetRange(ctx, "no/such/key", 0, 0)
	wantErr(t, "GetRange missing, zero length", err, blobstore.ErrNotFound)
	_, err = bs.Stat(ctx, "no/such/key")
	wantErr(t, "Stat missing", err, blobstore.ErrNotFound)
	ok, err := bs.Exists(ctx, "no/such/key")
	if err != nil || ok {
		t.Fatalf("Exists missing = %v, %v; want false, nil", ok, err)
	}
	if err := bs.Delete(ctx, "no/such/key"); err != nil {
		t.Fatalf("Delete missing: %v", err)
	}
	if keys := ListKeys(t, bs, ""); len(keys) != 0 {
		t.Fatalf("List of empty store = %q", keys)
	}
}

// InvalidKeys is the list of keys every store must reject. It is exported
// so other packages (labels, archive paths) can test against the same list.
var InvalidKeys = []string{
	"",
	".",
	"..",
	"../x",
	"a/../../b",
	"a/..",
	"/abs",
	"a//b",
	"a/./b",
	"a/",
	"a\x00b",
	"a\nb",
	"a\x7fb",
	"a\u0085b",
	"\xff\xfe",
	"a/\xc3",
	strings.Repeat("k/", blobstore.MaxKeyLen/2) + "k",
	strings.Repeat("s", blobstore.MaxSegmentLen+1),
	"a/" + strings.Repeat("s", blobstore.MaxSegmentLen+1) + "/b",
	// Dot segments in disguise, which MinIO refuses with 400
	// XMinioInvalidResourceName: '\' separates as '/' does, and the
	// spaces around a segment are trimmed.
	`a\..\b`,
	`..\x`,
	`x\..`,
	`a/b\.\c`,
	`\..`,
	`a\.`,
	"a/ .. /b",
	".. ",
	" .",
	" . ",
	"a/  ..",
	"a/\u3000..\u00a0/b",
	`a/ ..\b`,
	// MinIO keeps an object's metadata in <key>/xl.meta.
	"xl.meta",
	"a/xl.meta",
	"a/XL.Meta/b",
	// MinIO lists "a__XLDIR__" as "a/" (its encoding of directory
	// markers); XML, and so an S3 listing, cannot carry U+FFFE or U+FFFF.
	"a__XLDIR__",
	`a/b\__XLDIR__`,
	"a\uffff",
	"\ufffe/b",
	// Reserved for the S3 store's upload records.
	blobstore.ReservedUploadsSegment + "/x",
	"a/" + blobstore.ReservedUploadsSegment + "/b",
}

// LongestKey returns a valid key of exactly n bytes made of segments of
// at most 200 bytes (some stores, such as MinIO on overlayfs, refuse
// segments a little shorter than MaxSegmentLen).
func LongestKey(n int) string {
	var b strings.Builder
	for b.Len() < n {
		if b.Len() > 0 {
			b.WriteByte('/')
		}
		b.WriteString(strings.Repeat("k", min(200, n-b.Len())))
	}
	return b.String()
}

func (s *suite) testInvalidKeys(t *testing.T) {
	bs := s.open(t)
	ctx := ctxFor(t)
	for _, key := range InvalidKeys {
		t.Run(fmt.Sprintf("%.40q", key), func(t *testing.T) {
			wantErr(t, "Put", bs.Put(ctx, key, Stream([]byte("x"))), blobstore.ErrInvalidKey)
			_, err := bs.PutIfAbsent(ctx, key, Stream([]byte("x")))
			wantErr(t, "PutIfAbsent", err, blobstore.ErrInvalidKey)
			_, err = bs.PutIfMatch(ctx, key, `"etag"`, Stream([]byte("x")))
			wantErr(t, "PutIfMatch", err, blobstore.ErrInvalidKey)
			_, err = bs.Get(ctx, key)
			wantErr(t, "Get", err, blobstore.ErrInvalidKey)
			_, err = bs.GetRange(ctx, key, 0, 1)
			wantErr(t, "GetRange", err, blobstore.ErrInvalidKey)
			// The key is checked before the other arguments, so the error
			// is the same whatever else is wrong with the call.
			_, err = bs.GetRange(ctx, key, -1, 1)
			wantErr(t, "GetRange at a negative offset", err, blobstore.ErrInvalidKey)
			_, err = bs.Stat(ctx, key)
			wantErr(t, "Stat", err, blobstore.ErrInvalidKey)
			_, err = bs.Exists(ctx, key)
			wantErr(t, "Exists", err, blobstore.ErrInvalidKey)
			wantErr(t, "Delete", bs.Delete(ctx, key), blobstore.ErrInvalidKey)
		})
	}
	if keys := ListKeys(t, bs, ""); len(keys) != 0 {
		t.Fatalf("invalid keys left objects behind: %q", keys)
	}
	// The longest valid key is accepted.
	long := LongestKey(s.opts.MaxKeyLen)
	mustPut(t, bs, long, []byte("x"))
	sameBytes(t, "Get 1024-byte key", mustGet(t, bs, long), []byte("x"))
}

func (s *suite) testValidUnusualKeys(t *testing.T) {
	bs := s.open(t)
	keys := []string{"with space", "ünïcödé/日本", "a.b/..c/c..", "-dash/_under~tilde", "x=y&z+w", "%2F", "a/b.tmp",
		`back\slash`, `\lead`, `trail\`, `...\x`, ". x/ ", "sp/ /ace", "xl.meta.bkp/a.xl.meta", "__XLDIR__x/y", "\ufffd\U0010ffff"}
	for i, k := range keys {
		mustPut(t, bs, k, []byte{byte(i)})
	}
	for i, k := range keys {
		sameBytes(t, "Get "+k, mustGet(t, bs, k), []byte{byte(i)})
	}
	want := slices.Clone(keys)
	slices.Sort(want)
	if got := ListKeys(t, bs, ""); !slices.Equal(got, want) {
		t.Fatalf("List = %q, want %q", got, want)
	}
}

func (s *suite) testGetRange(t *testing.T) {
	bs := s.open(t)
	ctx := ctxFor(t)
	data := Payload(7, 1000)
	mustPut(t, bs, "r", data)
	mustPut(t, bs, "empty", nil)
	for _, tc := range []struct {
		name           string
		key            string
		offset, length int64
		want           []byte
	}{
		{"whole", "r", 0, -1, data},
		{"prefix", "r", 0, 10, data[:10]},
		{"middle", "r", 100, 200, data[100:300]},
		{"to-end", "r", 990, -1, data[990:]},
		{"zero-length", "r", 5, 0, nil},
		{"zero-length-at-end", "r", 1000, 0, nil},
		{"last-byte", "r", 999, 1, data[999:]},
		{"cut-at-end", "r", 900, 500, data[900:]},
		{"at-end", "r", 1000, 10, nil},
		{"past-end", "r", 5000, 10, nil},
		{"past-end-to-end", "r", 5000, -1, nil},
		{"empty-object", "empty", 0, 10, nil},
		{"empty-object-to-end", "empty", 0, -1, nil},
		// "To the end" written as a length no object reaches: the end
		// offset+length-1 overflows int64 (or is just short of it), and a
		// store that sends it as an HTTP range unchecked gets the whole
		// object back instead of the tail asked for.
		{"max-length", "r", 0, math.MaxInt64, data},
		{"max-length-from-middle", "r", 100, math.MaxInt64, data[100:]},
		{"max-length-last-byte", "r", 999, math.MaxInt64, data[999:]},
		{"length-ending-at-max", "r", 100, math.MaxInt64 - 100, data[100:]},
		{"length-ending-before-max", "r", 100, math.MaxInt64 - 101, data[100:]},
		{"length-just-overflowing", "r", 100, math.MaxInt64 - 99, data[100:]},
		{"huge-length", "r", 10, 1 << 62, data[10:]},
		{"max-length-at-end", "r", 1000, math.MaxInt64, nil},
		{"max-length-past-end", "r", 5000, math.MaxInt64, nil},
		{"max-offset", "r", math.MaxInt64, 1, nil},
		{"max-offset-max-length", "r", math.MaxInt64, math.MaxInt64, nil},
		{"max-offset-to-end", "r", math.MaxInt64, -1, nil},
		{"empty-object-max-length", "empty", 0, math.MaxInt64, nil},
		{"empty-object-max-length-from-middle", "empty", 7, math.MaxInt64, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc, err := bs.GetRange(ctx, tc.key, tc.offset, tc.length)
			if err != nil {
				t.Fatalf("GetRange(%d, %d): %v", tc.offset, tc.length, err)
			}
			defer rc.Close()
			got, err := io.ReadAll(rc)
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			sameBytes(t, fmt.Sprintf("GetRange(%d, %d)", tc.offset, tc.length), got, tc.want)
		})
	}
}

func (s *suite) testStat(t *testing.T) {
	bs := s.open(t)
	ctx := ctxFor(t)
	before := time.Now().Add(-time.Minute)
	etag, err := bs.PutIfAbsent(ctx, "s", Stream([]byte("hello")))
	if err != nil {
		t.Fatal(err)
	}
	info, err := bs.Stat(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if info.Key != "s" || info.Size != 5 || info.ETag != etag || info.ETag == "" {
		t.Fatalf("Stat = %+v, want key s, size 5, ETag %q", info, etag)
	}
	if info.ModTime.Before(before) || info.ModTime.After(time.Now().Add(time.Minute)) {
		t.Fatalf("Stat ModTime %v is not about now", info.ModTime)
	}
	ok, err := bs.Exists(ctx, "s")
	if err != nil || !ok {
		t.Fatalf("Exists = %v, %v; want true, nil", ok, err)
	}
	// List reports the same size and ETag as Stat.
	for li, err := range bs.List(ctx, "") {
		if err != nil {
			t.Fatal(err)
		}
		if li.Key != "s" || li.Size != 5 || li.ETag != etag {
			t.Fatalf("List info = %+v, want key s, size 5, ETag %q", li, etag)
		}
	}
}

// testGetWithInfo checks blobstore.GetWithInfo: the store's own where it
// is an InfoGetter, else Stat and Get. The body and info are of one
// version, and a compare-and-swap on the ETag succeeds.
func (s *suite) testGetWithInfo(t *testing.T) {
	bs := s.open(t)
	ctx := ctxFor(t)
	_, _, err := blobstore.GetWithInfo(ctx, bs, "missing")
	wantErr(t, "GetWithInfo of a missing key", err, blobstore.ErrNotFound)
	_, _, err = blobstore.GetWithInfo(ctx, bs, "../x")
	wantErr(t, "GetWithInfo of an invalid key", err, blobstore.ErrInvalidKey)

	before := time.Now().Add(-time.Minute)
	etag1, err := bs.PutIfAbsent(ctx, "g", Stream([]byte("v1")))
	if err != nil {
		t.Fatal(err)
	}
	got, info := getWithInfo(t, bs, "g")
	sameBytes(t, "GetWithInfo body", got, []byte("v1"))
	if info.Key != "g" || info.Size != 2 || info.ETag != etag1 {
		t.Fatalf("GetWithInfo info = %+v, want key g, size 2, ETag %q", info, etag1)
	}
	if info.ModTime.Before(before) || info.ModTime.After(time.Now().Add(time.Minute)) {
		t.Fatalf("GetWithInfo ModTime %v is not about now", info.ModTime)
	}
	st, err := bs.Stat(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if st.Size != info.Size || st.ETag != info.ETag || !st.ModTime.Equal(info.ModTime) {
		t.Fatalf("GetWithInfo info = %+v, Stat = %+v; want the same", info, st)
	}
	etag2, err := bs.PutIfMatch(ctx, "g", info.ETag, Stream([]byte("v2")))
	if err != nil {
		t.Fatalf("PutIfMatch with GetWithInfo's ETag: %v", err)
	}
	got, info = getWithInfo(t, bs, "g")
	sameBytes(t, "GetWithInfo body after PutIfMatch", got, []byte("v2"))
	if info.ETag != etag2 {
		t.Fatalf("GetWithInfo ETag after PutIfMatch = %q, want %q", info.ETag, etag2)
	}

	large := Payload(5, s.opts.LargeSize)
	mustPut(t, bs, "large", large)
	got, info = getWithInfo(t, bs, "large")
	sameBytes(t, "GetWithInfo body of a large object", got, large)
	if info.Size != int64(len(large)) {
		t.Fatalf("GetWithInfo size of a large object = %d, want %d", info.Size, len(large))
	}
}

// getWithInfo reads key with blobstore.GetWithInfo.
func getWithInfo(t *testing.T, bs blobstore.Blobstore, key string) ([]byte, blobstore.ObjectInfo) {
	t.Helper()
	rc, info, err := blobstore.GetWithInfo(ctxFor(t), bs, key)
	if err != nil {
		t.Fatalf("GetWithInfo(%q): %v", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("GetWithInfo(%q): read: %v", key, err)
	}
	return b, info
}

func (s *suite) testListOrderAndPaging(t *testing.T) {
	bs := s.open(t)
	n := s.opts.ListKeys
	// Keys chosen so directory-walk order differs from byte order:
	// "d/a-b" < "d/a/..." because '-' < '/', and "d/a0" > "d/a/...".
	var want []string
	for i := range n {
		var k string
		switch i % 5 {
		case 0:
			k = fmt.Sprintf("d/a/%05d", i)
		case 1:
			k = fmt.Sprintf("d/a-%05d", i)
		case 2:
			k = fmt.Sprintf("d/a0/%05d", i)
		case 3:
			k = fmt.Sprintf("d/%05d/x", i)
		default:
			k = fmt.Sprintf("e%05d", i)
		}
		want = append(want, k)
	}
	putParallel(t, bs, want)
	slices.Sort(want)
	got := ListKeys(t, bs, "")
	if !slices.Equal(got, want) {
		t.Fatalf("List(\"\") returned %d keys, want %d in byte order; first difference at %d", len(got), len(want), firstDiff(got, want))
	}
	var wantA []string
	for _, k := range want {
		if strings.HasPrefix(k, "d/a") {
			wantA = append(wantA, k)
		}
	}
	if got := ListKeys(t, bs, "d/a"); !slices.Equal(got, wantA) {
		t.Fatalf("List(\"d/a\") returned %d keys, want %d; first difference at %d", len(got), len(wantA), firstDiff(got, wantA))
	}
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func putParallel(t *testing.T, bs blobstore.Blobstore, keys []string) {
	t.Helper()
	ctx := ctxFor(t)
	var wg sync.WaitGroup
	errs := make(chan error, len(keys))
	work := make(chan string)
	for range 8 {
		wg.Go(func() {
			for k := range work {
				if err := bs.Put(ctx, k, Stream([]byte(k))); err != nil {
					errs <- fmt.Errorf("Put(%q): %w", k, err)
				}
			}
		})
	}
	for _, k := range keys {
		work <- k
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func (s *suite) testListPrefixSemantics(t *testing.T) {
	bs := s.open(t)
	keys := []string{"a/b/c", "a/bc", "a/b", "ab", "a/c", "b", "a/b/d/e"}
	// "a/b" and "a/b/c" cannot both exist on a filesystem; this test keeps
	// to keys every store can hold.
	keys = slices.DeleteFunc(keys, func(k string) bool { return k == "a/b" })
	putParallel(t, bs, keys)
	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		{"", []string{"a/b/c", "a/b/d/e", "a/bc", "a/c", "ab", "b"}},
		{"a", []string{"a/b/c", "a/b/d/e", "a/bc", "a/c", "ab"}},
		{"a/", []string{"a/b/c", "a/b/d/e", "a/bc", "a/c"}},
		{"a/b", []string{"a/b/c", "a/b/d/e", "a/bc"}},
		{"a/b/", []string{"a/b/c", "a/b/d/e"}},
		{"a/b/d/e", []string{"a/b/d/e"}},
		{"a/b/d/e/", nil},
		{"a/bc", []string{"a/bc"}},
		{"ab", []string{"ab"}},
		{"c", nil},
		{"zz/", nil},
	} {
		t.Run(fmt.Sprintf("%q", tc.prefix), func(t *testing.T) {
			if got := ListKeys(t, bs, tc.prefix); !slices.Equal(got, tc.want) {
				t.Fatalf("List(%q) = %q, want %q", tc.prefix, got, tc.want)
			}
		})
	}
}

func (s *suite) testListInvalidPrefix(t *testing.T) {
	bs := s.open(t)
	mustPut(t, bs, "x/y", []byte("1"))
	for _, prefix := range []string{"../", "../x", "a/../", "/abs", "a//", "\x00", "a/./b"} {
		var gotErr error
		for _, err := range bs.List(ctxFor(t), prefix) {
			if err != nil {
				gotErr = err
				break
			}
		}
		wantErr(t, fmt.Sprintf("List(%q)", prefix), gotErr, blobstore.ErrInvalidKey)
	}
}

func (s *suite) testListStopEarly(t *testing.T) {
	bs := s.open(t)
	putParallel(t, bs, []string{"1", "2", "3", "4"})
	var got []string
	for info, err := range bs.List(ctxFor(t), "") {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, info.Key)
		if len(got) == 2 {
			break
		}
	}
	if !slices.Equal(got, []string{"1", "2"}) {
		t.Fatalf("List stopped early = %q, want [1 2]", got)
	}
}

func (s *suite) testPutIfAbsent(t *testing.T) {
	bs := s.open(t)
	ctx := ctxFor(t)
	for _, size := range []int64{3, s.opts.LargeSize} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			key := fmt.Sprintf("pia/%d", size)
			first := Payload(uint64(size), size)
			etag, err := bs.PutIfAbsent(ctx, key, Stream(first))
			if err != nil {
				t.Fatalf("PutIfAbsent on absent key: %v", err)
			}
			if etag == "" {
				t.Fatal("PutIfAbsent returned an empty ETag")
			}
			_, err = bs.PutIfAbsent(ctx, key, Stream(Payload(99, size)))
			wantErr(t, "PutIfAbsent on present key", err, blobstore.ErrPreconditionFailed)
			sameBytes(t, "content after refused PutIfAbsent", mustGet(t, bs, key), first)
			info, err := bs.Stat(ctx, key)
			if err != nil || info.ETag != etag {
				t.Fatalf("Stat = %+v, %v; want ETag %q", info, err, etag)
			}
		})
	}
}

func (s *suite) testPutIfMatch(t *testing.T) {
	bs := s.open(t)
	ctx := ctxFor(t)
	_, err := bs.PutIfMatch(ctx, "m", `"whatever"`, Stream([]byte("x")))
	wantErr(t, "PutIfMatch on missing key", err, blobstore.ErrPreconditionFailed)
	if ok, _ := bs.Exists(ctx, "m"); ok {
		t.Fatal("PutIfMatch on a missing key created it")
	}

	etag1, err := bs.PutIfAbsent(ctx, "m", Stream([]byte("v1")))
	if err != nil {
		t.Fatal(err)
	}
	etag2, err := bs.PutIfMatch(ctx, "m", etag1, Stream([]byte("v2")))
	if err != nil {
		t.Fatalf("PutIfMatch with the current ETag: %v", err)
	}
	if etag2 == etag1 || etag2 == "" {
		t.Fatalf("PutIfMatch returned ETag %q (previous %q); want a new one", etag2, etag1)
	}
	_, err = bs.PutIfMatch(ctx, "m", etag1, Stream([]byte("stale")))
	wantErr(t, "PutIfMatch with a stale ETag", err, blobstore.ErrPreconditionFailed)
	_, err = bs.PutIfMatch(ctx, "m", "garbage-etag", Stream([]byte("garbage")))
	wantErr(t, "PutIfMatch with a garbage ETag", err, blobstore.ErrPreconditionFailed)
	_, err = bs.PutIfMatch(ctx, "m", "", Stream([]byte("empty")))
	if err == nil {
		t.Fatal("PutIfMatch with an empty ETag succeeded")
	}
	sameBytes(t, "content after refused PutIfMatch", mustGet(t, bs, "m"), []byte("v2"))

	large := Payload(3, s.opts.LargeSize)
	etag3, err := bs.PutIfMatch(ctx, "m", etag2, Stream(large))
	if err != nil {
		t.Fatalf("large PutIfMatch with the current ETag: %v", err)
	}
	_, err = bs.PutIfMatch(ctx, "m", etag2, Stream(Payload(4, s.opts.LargeSize)))
	wantErr(t, "large PutIfMatch with a stale ETag", err, blobstore.ErrPreconditionFailed)
	sameBytes(t, "content after large PutIfMatch", mustGet(t, bs, "m"), large)
	if info, err := bs.Stat(ctx, "m"); err != nil || info.ETag != etag3 {
		t.Fatalf("Stat = %+v, %v; want ETag %q", info, err, etag3)
	}
}

// race runs n writers at once and checks exactly one wins and that the
// stored bytes are the winner's.
func (s *suite) race(t *testing.T, bs blobstore.Blobstore, key string, write func(ctx context.Context, body []byte) (string, error)) {
	ctx := ctxFor(t)
	n := s.opts.Racers
	start := make(chan struct{})
	type result struct {
		i    int
		etag string
		err  error
	}
	results := make(chan result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			etag, err := write(ctx, fmt.Appendf(nil, "writer-%d", i))
			results <- result{i, etag, err}
		})
	}
	close(start)
	wg.Wait()
	close(results)
	winner := -1
	var winnerETag string
	for r := range results {
		switch {
		case r.err == nil:
			if winner >= 0 {
				t.Fatalf("writers %d and %d both won", winner, r.i)
			}
			winner, winnerETag = r.i, r.etag
		case errors.Is(r.err, blobstore.ErrPreconditionFailed):
		default:
			t.Fatalf("writer %d: unexpected error %v", r.i, r.err)
		}
	}
	if winner < 0 {
		t.Fatal("no writer won")
	}
	sameBytes(t, "stored bytes", mustGet(t, bs, key), fmt.Appendf(nil, "writer-%d", winner))
	if info, err := bs.Stat(ctx, key); err != nil || info.ETag != winnerETag {
		t.Fatalf("Stat = %+v, %v; want the winner's ETag %q", info, err, winnerETag)
	}
}

func (s *suite) testPutIfMatchRace(t *testing.T) {
	bs := s.open(t)
	etag, err := bs.PutIfAbsent(ctxFor(t), "race", Stream([]byte("base")))
	if err != nil {
		t.Fatal(err)
	}
	s.race(t, bs, "race", func(ctx context.Context, body []byte) (string, error) {
		return bs.PutIfMatch(ctx, "race", etag, bytes.NewReader(body))
	})
}

func (s *suite) testPutIfAbsentRace(t *testing.T) {
	bs := s.open(t)
	s.race(t, bs, "race", func(ctx context.Context, body []byte) (string, error) {
		return bs.PutIfAbsent(ctx, "race", bytes.NewReader(body))
	})
}

// failingReader returns n bytes of data, then err.
type failingReader struct {
	data []byte
	err  error
}

func (f *failingReader) Read(p []byte) (int, error) {
	if len(f.data) == 0 {
		return 0, f.err
	}
	n := copy(p, f.data)
	f.data = f.data[n:]
	return n, nil
}

var errReader = errors.New("blobstoretest: reader failed on purpose")

func (s *suite) testPutReaderFails(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int64
	}{{"small", 100}, {"large", s.opts.LargeSize}} {
		t.Run(tc.name, func(t *testing.T) {
			bs := s.open(t)
			ctx := ctxFor(t)
			mustPut(t, bs, "keep", []byte("old"))
			writes := map[string]func(r io.Reader) error{
				"Put":         func(r io.Reader) error { return bs.Put(ctx, "new", r) },
				"PutIfAbsent": func(r io.Reader) error { _, err := bs.PutIfAbsent(ctx, "new", r); return err },
				"Put over existing": func(r io.Reader) error {
					return bs.Put(ctx, "keep", r)
				},
			}
			for name, write := range writes {
				err := write(&failingReader{data: Payload(5, tc.size), err: errReader})
				if err == nil {
					t.Fatalf("%s with a failing reader succeeded", name)
				}
			}
			if got := ListKeys(t, bs, ""); !slices.Equal(got, []string{"keep"}) {
				t.Fatalf("after failed puts List = %q, want [keep]", got)
			}
			sameBytes(t, "object after a failed overwrite", mustGet(t, bs, "keep"), []byte("old"))
		})
	}
}

// blockingReader returns a first chunk, then blocks until ctx is done,
// then returns the rest normally: only the store's own attention to ctx
// can make the Put fail.
type blockingReader struct {
	ctx     context.Context
	first   []byte
	rest    []byte
	started chan struct{}
	once    sync.Once
}

func (b *blockingReader) Read(p []byte) (int, error) {
	if len(b.first) > 0 {
		n := copy(p, b.first)
		b.first = b.first[n:]
		return n, nil
	}
	b.once.Do(func() { close(b.started) })
	<-b.ctx.Done()
	if len(b.rest) == 0 {
		return 0, io.EOF
	}
	n := copy(p, b.rest)
	b.rest = b.rest[n:]
	return n, nil
}

func (s *suite) testPutContextCancelled(t *testing.T) {
	for _, tc := range []struct {
		name  string
		first int64
	}{{"small", 100}, {"large", s.opts.LargeSize}} {
		t.Run(tc.name, func(t *testing.T) {
			bs := s.open(t)
			ctx, cancel := context.WithCancel(ctxFor(t))
			r := &blockingReader{ctx: ctx, first: Payload(6, tc.first), rest: []byte("tail"), started: make(chan struct{})}
			done := make(chan error, 1)
			go func() { done <- bs.Put(ctx, "cancelled", r) }()
			select {
			case <-r.started:
			case err := <-done:
				t.Fatalf("Put returned %v before the reader blocked", err)
			}
			cancel()
			select {
			case err := <-done:
				if err == nil {
					t.Fatal("Put whose context was cancelled succeeded")
				}
			case <-time.After(2 * time.Minute):
				t.Fatal("Put did not return within 2 minutes of its context being cancelled")
			}
			if got := ListKeys(t, bs, ""); len(got) != 0 {
				t.Fatalf("cancelled Put left %q", got)
			}
		})
	}
}

// testContextCancelled checks that every method refuses a context that
// is already cancelled, reads as well as writes, and changes nothing.
func (s *suite) testContextCancelled(t *testing.T) {
	bs := s.open(t)
	mustPut(t, bs, "c/1", []byte("one"))
	info, err := bs.Stat(ctxFor(t), "c/1")
	if err != nil {
		t.Fatal(err)
	}
	etag := info.ETag
	ctx, cancel := context.WithCancel(ctxFor(t))
	cancel()
	calls := []struct {
		name string
		call func() error
	}{
		{"Get", func() error { return closeIfOpen(bs.Get(ctx, "c/1")) }},
		{"GetRange", func() error { return closeIfOpen(bs.GetRange(ctx, "c/1", 0, 1)) }},
		{"Stat", func() error { _, err := bs.Stat(ctx, "c/1"); return err }},
		{"Exists", func() error { _, err := bs.Exists(ctx, "c/1"); return err }},
		{"List", func() error {
			for _, err := range bs.List(ctx, "c/") {
				if err != nil {
					return err
				}
			}
			return nil
		}},
		{"Put", func() error { return bs.Put(ctx, "c/1", Stream([]byte("put"))) }},
		{"PutIfAbsent", func() error { _, err := bs.PutIfAbsent(ctx, "c/2", Stream([]byte("new"))); return err }},
		{"PutIfMatch", func() error { _, err := bs.PutIfMatch(ctx, "c/1", etag, Stream([]byte("cas"))); return err }},
		{"Delete", func() error { return bs.Delete(ctx, "c/1") }},
	}
	for _, c := range calls {
		if err := c.call(); !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled context: got error %v, want one wrapping %v", c.name, err, context.Canceled)
		}
	}
	if got := ListKeys(t, bs, ""); !slices.Equal(got, []string{"c/1"}) {
		t.Fatalf("after calls with a cancelled context the store holds %q, want [c/1]", got)
	}
	sameBytes(t, "c/1 after calls with a cancelled context", mustGet(t, bs, "c/1"), []byte("one"))
}

// closeIfOpen closes the reader of a Get that succeeded and returns its
// error.
func closeIfOpen(rc io.ReadCloser, err error) error {
	if err == nil {
		rc.Close()
	}
	return err
}

func (s *suite) testDelete(t *testing.T) {
	bs := s.open(t)
	ctx := ctxFor(t)
	mustPut(t, bs, "d/1", []byte("1"))
	mustPut(t, bs, "d/2", []byte("2"))
	if err := bs.Delete(ctx, "d/1"); err != nil {
		t.Fatal(err)
	}
	if err := bs.Delete(ctx, "d/1"); err != nil {
		t.Fatalf("second Delete: %v", err)
	}
	_, err := bs.Get(ctx, "d/1")
	wantErr(t, "Get after Delete", err, blobstore.ErrNotFound)
	if got := ListKeys(t, bs, ""); !slices.Equal(got, []string{"d/2"}) {
		t.Fatalf("List after Delete = %q, want [d/2]", got)
	}
	// A deleted key can be created again, conditionally too.
	if _, err := bs.PutIfAbsent(ctx, "d/1", Stream([]byte("again"))); err != nil {
		t.Fatalf("PutIfAbsent after Delete: %v", err)
	}
}
