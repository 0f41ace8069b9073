package s3store

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"golang.org/x/sync/errgroup"

	"github.com/tidemark-io/tidemark/blobstore"
)

var errReadAfterClose = errors.New("s3store: read after close")

// Parallel downloads fetch an object as ranges of PartSize bytes,
// Concurrency at a time, each with If-Match on the ETag that Stat saw, so
// an object replaced during the download fails with
// blobstore.ErrPreconditionFailed instead of mixing two versions.

// downloadCopyBuf is the size of the buffer through which Download copies
// each range from the response to the io.WriterAt: large enough that a
// file gets few pwrite calls, small enough that Concurrency of them cost
// nothing next to a part.
const downloadCopyBuf = 256 << 10

// getRange starts a GET of n > 0 bytes at off of okey, on condition that
// its ETag is still etag.
func (s *Store) getRange(ctx context.Context, key, okey, etag string, off, n int64) (io.ReadCloser, error) {
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{
		Bucket:  &s.bucket,
		Key:     &okey,
		Range:   aws.String(fmt.Sprintf("bytes=%d-%d", off, off+n-1)),
		IfMatch: aws.String(quote(etag)),
	})
	if err != nil {
		return nil, s.wrap("download", key, err, true)
	}
	return out.Body, nil
}

// fetchRange reads exactly len(dst) bytes at off from okey into dst and,
// if crc is not nil, sets it to their CRC32C, computed as they arrive.
func (s *Store) fetchRange(ctx context.Context, key, okey, etag string, off int64, dst []byte, crc *uint32) error {
	body, err := s.getRange(ctx, key, okey, etag, off, int64(len(dst)))
	if err != nil {
		return err
	}
	defer body.Close()
	for n := 0; n < len(dst); {
		m, err := body.Read(dst[n:])
		if crc != nil {
			*crc = crc32.Update(*crc, castagnoli, dst[n:n+m])
		}
		n += m
		if err == io.EOF && n < len(dst) {
			err = io.ErrUnexpectedEOF
		}
		if err != nil && err != io.EOF {
			return fmt.Errorf("s3store: download %q: range at %d: %w", key, off, err)
		}
	}
	return nil
}

// objectChecksum returns the object's size, ETag and, if a ranged
// download of it should be checked (the caller does not verify the
// content itself, uploads carry checksums, the object has a whole-object
// CRC32C), that CRC32C.
func (s *Store) objectChecksum(ctx context.Context, key, okey string) (info blobstore.ObjectInfo, crc uint32, check bool, err error) {
	if !s.checksums || blobstore.ContentVerified(ctx) {
		info, err = s.Stat(ctx, key)
		return info, 0, false, err
	}
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: &okey, ChecksumMode: types.ChecksumModeEnabled})
	if err != nil {
		return info, 0, false, s.wrap("stat", key, err, false)
	}
	info = blobstore.ObjectInfo{Key: key, Size: aws.ToInt64(out.ContentLength), ETag: unquote(out.ETag), ModTime: aws.ToTime(out.LastModified)}
	crc, check = fullObjectCRC32C(out.ChecksumCRC32C, out.ChecksumType)
	return info, crc, check, nil
}

// mismatch is the error of a download whose bytes have CRC32C got, not
// the object's want.
func mismatch(key string, got, want uint32) error {
	return fmt.Errorf("s3store: download %q: %w: CRC32C %08x, the store's is %08x", key, blobstore.ErrChecksum, got, want)
}

// copyRange copies n bytes at off from okey to w at the same offset,
// through buf, and sets *crc (if not nil) to their CRC32C.
func (s *Store) copyRange(ctx context.Context, key, okey, etag string, off, n int64, w io.WriterAt, buf []byte, crc *uint32) error {
	body, err := s.getRange(ctx, key, okey, etag, off, n)
	if err != nil {
		return err
	}
	defer body.Close()
	for done := int64(0); done < n; {
		m, err := io.ReadFull(body, buf[:min(int64(len(buf)), n-done)])
		if m > 0 {
			if crc != nil {
				*crc = crc32.Update(*crc, castagnoli, buf[:m])
			}
			if _, err := w.WriteAt(buf[:m], off+done); err != nil {
				return fmt.Errorf("s3store: download %q: write at %d: %w", key, off+done, err)
			}
			done += int64(m)
		}
		if err != nil {
			return fmt.Errorf("s3store: download %q: range at %d: %w", key, off, err)
		}
	}
	return nil
}

// Download writes the object at key to w with parallel ranged GETs and
// returns its size. Ranges arrive out of order and WriteAt is called from
// several goroutines at once (os.File allows that); use GetParallel to
// get the bytes in order instead (to hash them on the way, for example).
// It holds no part buffers: each range is copied from its response to w
// as it arrives, through a small buffer. On error, w may hold part of the
// object.
func (s *Store) Download(ctx context.Context, key string, w io.WriterAt) (int64, error) {
	okey, err := s.objectKey(key)
	if err != nil {
		return 0, err
	}
	info, want, check, err := s.objectChecksum(ctx, key, okey)
	if err != nil {
		return 0, err
	}
	// Each range's CRC32C, folded in order at the end (checksum.go).
	crcs := make([]uint32, (info.Size+s.partSize-1)/s.partSize)
	// An object of one part or less is one GET, streamed like the others;
	// an empty one needs none (and no range of it exists).
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.conc)
	// At most Concurrency ranges run at once, each holding one copy
	// buffer, so the channel never holds more than Concurrency buffers
	// and the send below never blocks.
	copyBufs := make(chan []byte, s.conc)
	for off := int64(0); off < info.Size; off += s.partSize {
		g.Go(func() error {
			var buf []byte
			select {
			case buf = <-copyBufs:
			default:
				buf = make([]byte, downloadCopyBuf)
			}
			defer func() { copyBufs <- buf }()
			var crc *uint32
			if check {
				crc = &crcs[off/s.partSize]
			}
			return s.copyRange(gctx, key, okey, info.ETag, off, min(s.partSize, info.Size-off), w, buf, crc)
		})
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	if check {
		var got uint32
		for i, c := range crcs {
			got = crc32Combine(got, c, min(s.partSize, info.Size-int64(i)*s.partSize))
		}
		if got != want {
			return 0, mismatch(key, got, want)
		}
	}
	return info.Size, nil
}

// GetParallel opens the object at key for reading, like Get, but fetches
// up to Concurrency ranges of PartSize bytes ahead in parallel and yields
// them in order, so a single reader (io.Copy into a file and a hasher)
// gets the throughput of a parallel download in one pass. It holds at
// most Concurrency buffers of PartSize bytes (none for an object of one
// part or less, which is read like Get). The reader implements
// io.WriterTo, so io.Copy writes each range straight from its buffer. The
// caller closes it.
func (s *Store) GetParallel(ctx context.Context, key string) (io.ReadCloser, error) {
	okey, err := s.objectKey(key)
	if err != nil {
		return nil, err
	}
	info, want, check, err := s.objectChecksum(ctx, key, okey)
	if err != nil {
		return nil, err
	}
	if info.Size <= s.partSize {
		return s.Get(ctx, key) // the SDK checks the CRC32C of one GET
	}
	ctx, cancel := context.WithCancel(ctx)
	pr := &parallelReader{
		key:    key,
		bufs:   newPartBudget(s.bufs, s.conc),
		cancel: cancel,
		queue:  make(chan *chunk, s.conc),
		check:  check,
		want:   want,
	}
	pr.wg.Go(func() {
		defer close(pr.queue)
		for off := int64(0); off < info.Size; off += s.partSize {
			// A buffer (and its slot) is taken before the fetch starts and
			// given back when the reader has consumed the chunk, which
			// bounds the buffers to Concurrency.
			buf, err := pr.bufs.get(ctx)
			if err != nil {
				// Cancelled (by the caller or by Close): the object is not
				// complete, so the reader must not see a clean EOF. Read
				// sees this after the queue is closed.
				pr.schedErr = fmt.Errorf("s3store: download %q: %w", key, err)
				return
			}
			c := &chunk{done: make(chan struct{}), buf: buf, n: int(min(s.partSize, info.Size-off))}
			pr.queue <- c // never blocks: at most conc chunks hold slots
			pr.wg.Go(func() {
				defer close(c.done)
				var crc *uint32
				if check {
					crc = &c.crc
				}
				c.err = s.fetchRange(ctx, key, okey, info.ETag, off, (*c.buf)[:c.n], crc)
			})
		}
	})
	return pr, nil
}

type chunk struct {
	done chan struct{}
	buf  *[]byte
	n    int
	crc  uint32 // CRC32C of (*buf)[:n], if checked
	err  error
}

// parallelReader yields the chunks GetParallel fetches, in order. Read,
// WriteTo and Close are for one goroutine.
type parallelReader struct {
	key      string
	bufs     *partBudget
	cancel   context.CancelFunc
	queue    chan *chunk
	schedErr error // set by the scheduler before it closes queue
	wg       sync.WaitGroup
	cur      *chunk
	off      int
	err      error
	once     sync.Once
	// check: the chunks' CRC32Cs, folded in order into crc, must give
	// want, the object's, at the end.
	check     bool
	crc, want uint32
}

// release gives back c's buffer. A failed GET leaves nothing reading it:
// fetchRange has returned and closed the body.
func (r *parallelReader) release(c *chunk) {
	r.bufs.put(c.buf)
}

// next makes r.cur a chunk with bytes left to yield, waiting for its
// fetch, or returns the error that ends the reader (io.EOF at the end).
func (r *parallelReader) next() error {
	if r.err != nil {
		return r.err
	}
	for r.cur == nil || r.off == r.cur.n {
		if r.cur != nil {
			r.release(r.cur)
			r.cur = nil
		}
		c, ok := <-r.queue
		if !ok {
			r.err = io.EOF
			switch {
			case r.schedErr != nil:
				r.err = r.schedErr
			case r.check && r.crc != r.want:
				r.err = mismatch(r.key, r.crc, r.want)
			}
			return r.err
		}
		<-c.done
		if c.err != nil {
			r.release(c)
			r.err = c.err
			return r.err
		}
		if r.check {
			r.crc = crc32Combine(r.crc, c.crc, int64(c.n))
		}
		r.cur, r.off = c, 0
	}
	return nil
}

func (r *parallelReader) Read(p []byte) (int, error) {
	if err := r.next(); err != nil {
		return 0, err
	}
	n := copy(p, (*r.cur.buf)[r.off:r.cur.n])
	r.off += n
	return n, nil
}

// WriteTo writes the rest of the object to w, each chunk in one Write
// from its buffer, and returns the bytes written. io.Copy uses it, which
// saves copying every byte through the caller's buffer.
func (r *parallelReader) WriteTo(w io.Writer) (int64, error) {
	var total int64
	for {
		if err := r.next(); err != nil {
			if err == io.EOF {
				return total, nil
			}
			return total, err
		}
		n, err := w.Write((*r.cur.buf)[r.off:r.cur.n])
		r.off += n
		total += int64(n)
		if err == nil && r.off < r.cur.n {
			err = io.ErrShortWrite
		}
		if err != nil {
			return total, err
		}
	}
}

// Close stops the prefetching and waits for it, so no request outlives
// the reader.
func (r *parallelReader) Close() error {
	r.once.Do(func() {
		r.cancel()
		if r.cur != nil {
			r.release(r.cur)
			r.cur = nil
		}
		// Drain what was scheduled so the scheduler can finish.
		for c := range r.queue {
			<-c.done
			r.release(c)
		}
		r.wg.Wait()
		if r.err == nil {
			r.err = errReadAfterClose
		}
	})
	return nil
}
