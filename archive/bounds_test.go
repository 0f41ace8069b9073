package archive

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

// countingFn is a Read callback that counts the bytes it receives and
// gives up as soon as they exceed max: the reader must never hand out
// more bytes than its input holds (for a plain tar) or than the
// documented expansion allows (for zstd).
func countingFn(max int64, got *int64) func(File, io.Reader) error {
	return func(f File, r io.Reader) error {
		n, err := io.Copy(io.Discard, io.LimitReader(r, max+1-*got))
		*got += n
		if *got > max {
			return fmt.Errorf("%s: the reader handed out over %d bytes", f.Path, max)
		}
		return err
	}
}

func TestCraftedSparseArchivesReallyExpand(t *testing.T) {
	// The inputs of TestSparseEntriesAreRefused are what they claim:
	// archive/tar makes a 1 MiB file out of each of them.
	for _, format := range []string{"gnu-old", "pax-0.0", "pax-0.1", "pax-1.0"} {
		tr := tar.NewReader(bytes.NewReader(sparseArchive(format, 1<<20)))
		_, err := tr.Next()
		mustNoErr(t, err)
		_, err = io.Copy(io.Discard, tr)
		mustNoErr(t, err)
		hdr, err := tr.Next()
		mustNoErr(t, err)
		n, err := io.Copy(io.Discard, tr)
		mustNoErr(t, err)
		if hdr.Name != "state/a/big" || n != 1<<20 {
			t.Errorf("%s: entry %q reads as %d bytes, want state/a/big of 1 MiB", format, hdr.Name, n)
		}
	}
}

func TestSparseEntriesAreRefused(t *testing.T) {
	for _, format := range []string{"gnu-old", "pax-0.0", "pax-0.1", "pax-1.0"} {
		// 2 GiB: a 4 KiB archive writing a 2 GiB file; 256 GiB: Verify
		// hashing 256 GiB (the default MaxTotalBytes).
		for _, size := range []int64{2 << 30, 256 << 30} {
			t.Run(fmt.Sprintf("%s/%d-GiB", format, size>>30), func(t *testing.T) {
				data := sparseArchive(format, size)
				var got int64
				_, err := Read(t.Context(), bytes.NewReader(data), Limits{}, countingFn(int64(len(data)), &got))
				if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), `"state/a/big"`) || !strings.Contains(err.Error(), "sparse") {
					t.Fatalf("%d-byte archive: got %v, want ErrCorrupt naming state/a/big as sparse", len(data), err)
				}
				if got > 0 {
					t.Errorf("fn received %d bytes of a refused entry", got)
				}
			})
		}
	}
}

func TestEntryReaderRefusesBytesTheStreamDoesNotCarry(t *testing.T) {
	// Whatever the header trick, the check that an entry's bytes come
	// from the stream catches it: here a reader that, like a sparse
	// file, makes up zeros.
	count := &countingReader{r: strings.NewReader("abc")}
	er := &entryReader{r: io.MultiReader(count, bytes.NewReader(make([]byte, 10))), count: count, f: File{Path: "state/a/x", Size: 13}}
	_, err := io.Copy(io.Discard, er)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "synthesized") {
		t.Fatalf("got %v, want ErrCorrupt about synthesized data", err)
	}
}

// liftedLimits are Limits raised as far as they go.
var liftedLimits = Limits{MaxTotalBytes: math.MaxInt64, MaxFiles: math.MaxInt, MaxManifestBytes: math.MaxInt64, MaxExpansion: math.MaxInt64}

func TestDeclaredManifestSizeIsNeverAllocated(t *testing.T) {
	// A manifest header declaring a huge size, followed by a few bytes:
	// refused as truncated, having allocated only for what is there,
	// even with every limit lifted.
	for _, size := range []int64{1 << 30, 1 << 40, 1 << 62, math.MaxInt64} {
		for _, compress := range []bool{false, true} {
			t.Run(fmt.Sprintf("%d/zstd=%v", size, compress), func(t *testing.T) {
				data := rawTar(regSized(ManifestName, size, []byte(`{"version":1,"record":{},"files":[`)))
				if compress {
					data = zstdOf(data)
				}
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				_, err := Verify(t.Context(), bytes.NewReader(data), liftedLimits)
				runtime.ReadMemStats(&after)
				if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), strconv.Quote(ManifestName)) {
					t.Fatalf("got %v, want ErrCorrupt naming the manifest", err)
				}
				if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16<<20 {
					t.Errorf("allocated %d bytes reading a %d-byte input", alloc, len(data))
				}
			})
		}
	}
}

// manifestStream generates, without holding it, a tar stream whose only
// entry is the largest manifest maxBytes allows, made of the smallest
// possible file entries (so as many as possible: the worst case of
// memory per manifest byte). The stream stops after the manifest; no
// files follow.
type manifestStream struct {
	size  int64 // bytes of JSON
	files int
	next  int    // next file to generate
	buf   []byte // bytes generated, not yet read
	pad   int    // zero bytes still to come after the JSON
}

const (
	genPrefix = `{"version":1,"record":{"id":"0000000042"},"files":[`
	genSuffix = `]}`
)

func genEntry(dst []byte, i int) []byte {
	dst = append(dst, `{"path":"state/a/`...)
	dst = strconv.AppendInt(dst, int64(i), 36)
	dst = append(dst, `","size":0,"sha256":"`...)
	dst = append(dst, fileOf("", nil).SHA256...)
	return append(dst, `"}`...)
}

func newManifestStream(maxBytes int64) *manifestStream {
	g := &manifestStream{size: int64(len(genPrefix) + len(genSuffix))}
	var scratch []byte
	for i := 0; ; i++ {
		n := int64(len(genEntry(scratch[:0], i)))
		if i > 0 {
			n++ // comma
		}
		if g.size+n > maxBytes {
			break
		}
		g.size += n
		g.files++
	}
	var h bytes.Buffer
	tw := tar.NewWriter(&h)
	hdr := regSized(ManifestName, g.size, nil).hdr
	if err := tw.WriteHeader(&hdr); err != nil {
		panic(err)
	}
	g.buf = append(h.Bytes(), genPrefix...)
	g.pad = int(-g.size & 511)
	return g
}

func (g *manifestStream) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		switch {
		case len(g.buf) > 0:
			k := copy(p[n:], g.buf)
			g.buf = g.buf[k:]
			n += k
		case g.next < g.files:
			g.buf = g.buf[:0]
			if g.next > 0 {
				g.buf = append(g.buf, ',')
			}
			g.buf = genEntry(g.buf, g.next)
			g.next++
			if g.next == g.files {
				g.buf = append(g.buf, genSuffix...)
			}
		case g.pad > 0:
			k := min(len(p)-n, g.pad)
			clear(p[n : n+k])
			g.pad -= k
			n += k
		default:
			if n == 0 {
				return 0, io.EOF
			}
			return n, nil
		}
	}
	return n, nil
}

// heapSampler records the peak heap in use while it runs.
type heapSampler struct {
	stop chan struct{}
	done sync.WaitGroup
	peak uint64
}

var heapMetrics = []string{"/memory/classes/heap/objects:bytes", "/memory/classes/heap/unused:bytes"}

func heapInUse() uint64 {
	s := []metrics.Sample{{Name: heapMetrics[0]}, {Name: heapMetrics[1]}}
	metrics.Read(s)
	return s[0].Value.Uint64() + s[1].Value.Uint64()
}

func startHeapSampler() *heapSampler {
	h := &heapSampler{stop: make(chan struct{})}
	h.done.Add(1)
	go func() {
		defer h.done.Done()
		for {
			h.peak = max(h.peak, heapInUse())
			select {
			case <-h.stop:
				return
			case <-time.After(200 * time.Microsecond):
			}
		}
	}()
	return h
}

func (h *heapSampler) finish() uint64 {
	close(h.stop)
	h.done.Wait()
	return max(h.peak, heapInUse())
}

func TestPeakHeapReadingLargestManifest(t *testing.T) {
	// The bound Limits documents: at most 3 × MaxManifestBytes + 16 MiB
	// (the zstd window included) above what was in use before.
	size := DefaultMaxManifestBytes
	if raceEnabled {
		// The race detector makes decoding 64 MiB take over a minute;
		// the ratio is the same at 8 MiB.
		size /= 8
		t.Logf("race detector on: measuring a manifest of %d bytes instead of the %d the defaults allow", size, DefaultMaxManifestBytes)
	}
	bound := 3*size + 16<<20
	for _, compress := range []bool{false, true} {
		t.Run(fmt.Sprintf("zstd=%v", compress), func(t *testing.T) {
			gen := newManifestStream(size)
			var input io.Reader = gen
			if compress {
				var buf bytes.Buffer
				enc, err := zstd.NewWriter(&buf, zstd.WithEncoderConcurrency(1))
				mustNoErr(t, err)
				_, err = io.Copy(enc, gen)
				mustNoErr(t, err)
				mustNoErr(t, enc.Close())
				t.Logf("compressed: %d bytes", buf.Len())
				input = &buf
			}
			runtime.GC()
			base := heapInUse()
			h := startHeapSampler()
			start := time.Now()
			ar, err := NewReader(t.Context(), input, Limits{})
			elapsed := time.Since(start)
			peak := h.finish()
			mustNoErr(t, err)
			m := ar.Manifest()
			ar.Close()
			if len(m.Files) != gen.files {
				t.Fatalf("decoded %d files, generated %d", len(m.Files), gen.files)
			}
			used := int64(peak) - int64(base)
			t.Logf("manifest %d bytes, %d files: peak heap %d bytes above base (%.2f× the manifest), read in %v",
				gen.size, gen.files, used, float64(used)/float64(gen.size), elapsed)
			if used > bound {
				t.Errorf("peak heap %d bytes above base, over the documented %d", used, bound)
			}
			runtime.KeepAlive(m)
		})
	}
}

func TestZstdExpansionIsBounded(t *testing.T) {
	// A valid archive of 80 MiB of zeros, 3 KiB compressed: refused
	// once it has produced MaxExpansion × its size + ExpansionAllowance.
	const size = 80 << 20
	data := zstdZeroBomb(size, zeroDigest(size))
	limit := DefaultMaxExpansion*int64(len(data)) + ExpansionAllowance
	var got int64
	_, err := Read(t.Context(), bytes.NewReader(data), Limits{}, countingFn(limit, &got))
	if !errors.Is(err, ErrTooLarge) || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), `"state/a/zeros"`) {
		t.Fatalf("%d-byte input: got %v, want ErrTooLarge naming state/a/zeros", len(data), err)
	}
	t.Logf("%d-byte input refused after %d bytes (bound %d)", len(data), got, limit)

	// Lifting the limit accepts it: the bomb is a valid archive.
	if _, err := Verify(t.Context(), bytes.NewReader(data), Limits{MaxExpansion: math.MaxInt64}); err != nil {
		t.Fatalf("with MaxExpansion lifted: %v", err)
	}
}

func TestZstdCompressibleArchiveWithinAllowanceIsAccepted(t *testing.T) {
	// 48 MiB of zeros compress to almost nothing but stay within
	// ExpansionAllowance: small archives are never refused for their
	// ratio.
	const size = 48 << 20
	f := File{Path: "state/a/zeros", Size: size, SHA256: zeroDigest(size)}
	m := &Manifest{Version: FormatVersion, Record: []byte(testRecord), Files: []File{f}}
	var buf bytes.Buffer
	open := func(context.Context, string) (io.ReadCloser, error) {
		return io.NopCloser(io.LimitReader(zeroReader{}, size)), nil
	}
	mustNoErr(t, Write(t.Context(), &buf, m, open, WriteOptions{Compress: true}))
	if _, err := Verify(t.Context(), bytes.NewReader(buf.Bytes()), Limits{}); err != nil {
		t.Fatalf("%d bytes compressed to %d: %v", size, buf.Len(), err)
	}
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func TestZstdWindowOverLimitIsRefused(t *testing.T) {
	// Compressed with a 16 MiB window (zstd --long or --ultra): refused
	// from the frame header, before the decoder allocates the window.
	// The encoder shrinks the window to the content, so give it more
	// than 8 MiB (what follows the archive does not matter here).
	var buf bytes.Buffer
	enc, err := zstd.NewWriter(&buf, zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(16<<20), zstd.WithSingleSegment(false))
	mustNoErr(t, err)
	_, err = enc.Write(append(goodArchive(), make([]byte, 9<<20)...))
	mustNoErr(t, err)
	mustNoErr(t, enc.Close())
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = Verify(t.Context(), bytes.NewReader(buf.Bytes()), Limits{})
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "window") {
		t.Fatalf("got %v, want ErrTooLarge about the window", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
		t.Errorf("allocated %d bytes before refusing", alloc)
	}
}

// BenchmarkRefuseZstdBomb measures how long crafted zstd inputs of 2 MiB
// take to be refused. "rle": RLE blocks declaring 64 GiB of zeros
// (before MaxExpansion, Verify decompressed and hashed all of it);
// refused as soon as its output outruns MaxExpansion × the input read so
// far. "ratio-126": expands 126× throughout, just under the limit, the
// most work any 2 MiB input can cause; refused at the end, by its digest.
func BenchmarkRefuseZstdBomb(b *testing.B) {
	for _, c := range []struct {
		name string
		data []byte
	}{
		{"rle", zstdZeroBomb(64<<30, bogusDigest)},
		{"ratio-126", zstdRatioBomb(2 << 20)},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.data)))
			var got int64
			for b.Loop() {
				got = 0
				_, err := Read(b.Context(), bytes.NewReader(c.data), Limits{}, countingFn(math.MaxInt64-1, &got))
				if !errors.Is(err, ErrCorrupt) {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(c.data)), "input-bytes")
			b.ReportMetric(float64(got), "produced-bytes")
		})
	}
}
