package s3store

// Benchmarks against real MinIO (the shared miniotest server), each next
// to the plain SDK (feature/s3/transfermanager) doing the same transfer
// with the same part size and concurrency, on the same client, in the same
// run.
//
// # Running
//
// They run only with -bench; go test without it starts no server for them.
//
//	go test -run '^$' -bench . ./s3store/                         # 1 GiB cases run once each anyway
//	go test -run '^$' -bench . -benchtime=1x -count=3 ./s3store/   # every case once, three times
//	go test -run '^$' -bench '//(1MiB|64MiB)$' -count=3 ./s3store/ # small sizes at the normal benchtime
//	go test -run '^$' -bench 'Put/.*/1GiB' -benchtime=1x ./s3store/
//
// Prefix TIDEMARK_MINIO=process to run MinIO as a local process rather
// than a container (see Caveats). The 1 GiB cases need about 2 GiB free
// under $TMPDIR (the SDK's input file and MinIO's data) and take a few
// seconds each.
//
// Names compare like with like:
//
//	BenchmarkPut/tidemark-stream/SIZE   Store.Put of a non-seekable stream
//	BenchmarkPut/tidemark-stream-unsigned/SIZE  the same with Options.UnsignedPayload
//	BenchmarkPut/sdk-file/SIZE          transfermanager.UploadObject of an *os.File of SIZE bytes
//	BenchmarkGet/tidemark/SIZE          Store.Get, one GET read sequentially
//	BenchmarkGet/tidemark-file/SIZE     Store.Get copied into a file with io.Copy (as the peer benchmark's Get row)
//	BenchmarkGet/tidemark-parallel/SIZE Store.GetParallel, ranged GETs yielded in order
//	BenchmarkGet/tidemark-download/SIZE Store.Download into an io.WriterAt
//	BenchmarkGet/sdk-downloader/SIZE    transfermanager.DownloadObject (ranges) into an io.WriterAt
//	BenchmarkGet/sdk-getobject/SIZE     transfermanager.GetObject, the SDK's concurrent streaming reader
//
// # Metrics
//
// MB/s comes from b.SetBytes. peak-MiB is the growth of this process's
// resident set (VmHWM after resetting it through /proc/self/clear_refs,
// and VmRSS sampled) over its value before the benchmark, after returning
// freed memory to the OS; heap-peak-MiB is the same for the Go heap's
// object bytes (runtime/metrics, sampled). Each benchmark starts with the
// Store's buffer cache emptied, so the buffers it uses are counted even if
// an earlier benchmark left them cached. bound-MiB is what Options
// promises: PartSize × (Concurrency+1) for an upload, PartSize ×
// Concurrency for GetParallel (Download holds no part buffers). MinIO is another
// process (or container) and is not counted in those. cpu-ms/op is this
// process's CPU time (user+system, all threads, 10 ms ticks) per
// operation and minio-cpu-ms/op MinIO's, when it runs as a process
// (TIDEMARK_MINIO=process): on a CPU-bound machine these tell where the
// time goes better than MB/s, which moves with whatever else runs.
//
// Downloads drain into a writer that discards (io.CopyBuffer with a
// 256 KiB buffer for streams, a no-op WriteAt for the WriterAt APIs), so
// they measure the transfer and not the local disk.
//
// # Caveats
//
// MinIO runs on the same machine, so the figures are CPU-bound (on a
// 2-core box MinIO spent about 3.2 CPU-seconds per GiB uploaded and 0.55
// per GiB downloaded, this process 1.4 and 0.3) and shift with anything
// else running; compare variants of one run, not runs of different days. In
// Docker mode MinIO writes into the container's layer, which on a
// fuse-overlayfs daemon adds a FUSE round trip per write; TIDEMARK_MINIO=process
// avoids that.

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	tmtypes "github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager/types"

	"github.com/tidemark-io/tidemark/integration/miniotest"
)

// The benchmarks use the defaults users get: 16 MiB parts, 4 at a time.
const (
	benchPartSize    = DefaultPartSize
	benchConcurrency = DefaultConcurrency
)

var benchSizes = []struct {
	name string
	n    int64
}{
	{"1MiB", 1 << 20},
	{"64MiB", 64 << 20},
	{"1GiB", 1 << 30},
}

// benchBlock is the block genReader repeats: random, so nothing on the way
// can compress it.
func benchBlock() []byte { return randomBytes(1<<20, 42) }

func newBenchStore(b *testing.B, edit ...func(*Options)) *Store {
	b.Helper()
	srv := miniotest.Shared(b)
	opts := Options{
		Bucket:      srv.NewBucket(b),
		Region:      srv.Region,
		Endpoint:    srv.Endpoint,
		PathStyle:   true,
		AccessKey:   srv.AccessKey,
		SecretKey:   srv.SecretKey,
		PartSize:    benchPartSize,
		Concurrency: benchConcurrency,
	}
	for _, e := range edit {
		e(&opts)
	}
	s, err := New(context.Background(), opts)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// newTransferManager returns the SDK's transfer manager on s's client
// (same HTTP transport, retryer and checksum settings) with s's part size
// and concurrency, downloading by ranges like GetParallel does.
func newTransferManager(s *Store) *transfermanager.Client {
	return transfermanager.New(s.Client(), func(o *transfermanager.Options) {
		o.PartSizeBytes = s.partSize
		o.Concurrency = s.conc
		o.GetObjectType = tmtypes.GetObjectRanges
	})
}

// assertSize fails b unless the object at key holds n bytes.
func assertSize(b *testing.B, s *Store, key string, n int64) {
	b.Helper()
	info, err := s.Stat(b.Context(), key)
	if err != nil {
		b.Fatal(err)
	}
	if info.Size != n {
		b.Fatalf("%q holds %d bytes, want %d", key, info.Size, n)
	}
}

func BenchmarkPut(b *testing.B) {
	s := newBenchStore(b)
	tm := newTransferManager(s)
	block := benchBlock()
	bound := s.partSize * int64(s.conc+1)

	// The SDK's input files, written once per size on first use.
	dir := b.TempDir()
	var mu sync.Mutex
	files := map[int64]string{}
	fileOf := func(b *testing.B, n int64) string {
		mu.Lock()
		defer mu.Unlock()
		if p, ok := files[n]; ok {
			return p
		}
		p := filepath.Join(dir, "input-"+formatSize(n))
		f, err := os.Create(p)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(f, newGenReader(block, n)); err != nil {
			b.Fatal(err)
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
		files[n] = p
		return p
	}

	unsigned := newBenchStore(b, func(o *Options) { o.UnsignedPayload = true })
	for _, v := range []struct {
		name string
		s    *Store
	}{{"tidemark-stream", s}, {"tidemark-stream-unsigned", unsigned}} {
		b.Run(v.name, func(b *testing.B) {
			for _, size := range benchSizes {
				b.Run(size.name, func(b *testing.B) {
					key := "put/" + v.name + "/" + size.name
					b.SetBytes(size.n)
					b.ReportAllocs()
					v.s.bufs.release() // measure from an empty buffer cache
					m := startMeter(b, miniotest.Shared(b).PID())
					for b.Loop() {
						if err := v.s.Put(b.Context(), key, newGenReader(block, size.n)); err != nil {
							b.Fatal(err)
						}
					}
					m.report(b, bound)
					assertSize(b, v.s, key, size.n)
				})
			}
		})
	}

	b.Run("sdk-file", func(b *testing.B) {
		for _, size := range benchSizes {
			b.Run(size.name, func(b *testing.B) {
				key := "put/sdk/" + size.name
				path := fileOf(b, size.n)
				b.SetBytes(size.n)
				b.ReportAllocs()
				m := startMeter(b, miniotest.Shared(b).PID())
				for b.Loop() {
					f, err := os.Open(path)
					if err != nil {
						b.Fatal(err)
					}
					_, err = tm.UploadObject(b.Context(), &transfermanager.UploadObjectInput{
						Bucket: aws.String(s.bucket),
						Key:    aws.String(key),
						Body:   f,
					})
					f.Close()
					if err != nil {
						b.Fatal(err)
					}
				}
				m.report(b, bound)
				assertSize(b, s, key, size.n)
			})
		}
	})
}

func BenchmarkGet(b *testing.B) {
	s := newBenchStore(b)
	tm := newTransferManager(s)
	block := benchBlock()

	// One object per size, uploaded (by Put, so in parts of PartSize) on
	// first use.
	var mu sync.Mutex
	objects := map[int64]string{}
	objectOf := func(b *testing.B, n int64) string {
		mu.Lock()
		defer mu.Unlock()
		if key, ok := objects[n]; ok {
			return key
		}
		key := "get/" + formatSize(n)
		if err := s.Put(b.Context(), key, newGenReader(block, n)); err != nil {
			b.Fatal(err)
		}
		objects[n] = key
		return key
	}

	type getter func(ctx context.Context, key string) (int64, error)
	stream := func(open func(context.Context, string) (io.ReadCloser, error)) getter {
		buf := make([]byte, 256<<10)
		return func(ctx context.Context, key string) (int64, error) {
			rc, err := open(ctx, key)
			if err != nil {
				return 0, err
			}
			defer rc.Close()
			return drain(rc, buf)
		}
	}
	impls := []struct {
		name  string
		get   getter
		bound int64 // buffers promised, for objects over one part
	}{
		{"tidemark", stream(s.Get), 0},
		{"tidemark-file", func(ctx context.Context, key string) (int64, error) {
			return getToFile(b, ctx, s.Get, key)
		}, 0},
		{"tidemark-parallel", stream(s.GetParallel), s.partSize * int64(s.conc)},
		{"tidemark-download", func(ctx context.Context, key string) (int64, error) {
			return s.Download(ctx, key, discardAt{})
		}, 0},
		{"sdk-downloader", func(ctx context.Context, key string) (int64, error) {
			out, err := tm.DownloadObject(ctx, &transfermanager.DownloadObjectInput{
				Bucket:   aws.String(s.bucket),
				Key:      aws.String(key),
				WriterAt: discardAt{},
			})
			if err != nil {
				return 0, err
			}
			return aws.ToInt64(out.ContentLength), nil
		}, 0},
		{"sdk-getobject", stream(func(ctx context.Context, key string) (io.ReadCloser, error) {
			out, err := tm.GetObject(ctx, &transfermanager.GetObjectInput{
				Bucket: aws.String(s.bucket),
				Key:    aws.String(key),
			})
			if err != nil {
				return nil, err
			}
			return io.NopCloser(out.Body), nil
		}), 0},
	}

	for _, impl := range impls {
		b.Run(impl.name, func(b *testing.B) {
			for _, size := range benchSizes {
				b.Run(size.name, func(b *testing.B) {
					key := objectOf(b, size.n)
					b.SetBytes(size.n)
					b.ReportAllocs()
					s.bufs.release() // the upload's buffers; measure from none
					m := startMeter(b, miniotest.Shared(b).PID())
					for b.Loop() {
						n, err := impl.get(b.Context(), key)
						if err != nil {
							b.Fatal(err)
						}
						if n != size.n {
							b.Fatalf("got %d bytes, want %d", n, size.n)
						}
					}
					m.report(b, impl.bound)
				})
			}
		})
	}
}

// getToFile copies the object at key into a new file under b's temporary
// directory with io.Copy, as `mc cat KEY > FILE` does, and removes the
// file (the removal is timed too, and cheap next to the copy).
func getToFile(b *testing.B, ctx context.Context, open func(context.Context, string) (io.ReadCloser, error), key string) (int64, error) {
	rc, err := open(ctx, key)
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	f, err := os.CreateTemp(b.TempDir(), "get-")
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name())
	n, err := io.Copy(f, rc)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// drain reads r to EOF through buf, as io.Copy into a file or a hasher
// would, and returns the byte count. The destination hides io.Discard's
// ReadFrom (8 KiB reads, which no real destination does); a reader that
// implements io.WriterTo still gets to use it, as it would with a file.
func drain(r io.Reader, buf []byte) (int64, error) {
	return io.CopyBuffer(struct{ io.Writer }{io.Discard}, r, buf)
}

func formatSize(n int64) string {
	for _, s := range benchSizes {
		if s.n == n {
			return s.name
		}
	}
	return "size"
}
