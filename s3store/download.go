package s3store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"golang.org/x/sync/errgroup"
)

var errReadAfterClose = errors.New("s3store: read after close")

// Parallel downloads fetch an object as ranges of PartSize bytes,
// Concurrency at a time, each with If-Match on the ETag that Stat saw, so
// an object replaced during the download fails with
// blobstore.ErrPreconditionFailed instead of mixing two versions.

// fetchRange reads exactly len(dst) bytes at off from okey into dst.
func (s *Store) fetchRange(ctx context.Context, key, okey, etag string, off int64, dst []byte) error {
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{
		Bucket:  &s.bucket,
		Key:     &okey,
		Range:   aws.String(fmt.Sprintf("bytes=%d-%d", off, off+int64(len(dst))-1)),
		IfMatch: aws.String(quote(etag)),
	})
	if err != nil {
		return s.wrap("download", key, err, true)
	}
	defer out.Body.Close()
	if _, err := io.ReadFull(out.Body, dst); err != nil {
		return fmt.Errorf("s3store: download %q: range at %d: %w", key, off, err)
	}
	return nil
}

// Download writes the object at key to w with parallel ranged GETs and
// returns its size. Ranges arrive out of order and WriteAt is called from
// several goroutines at once (os.File allows that); use GetParallel to
// get the bytes in order instead (to hash them on the way, for example).
// On error, w may hold part of the object.
func (s *Store) Download(ctx context.Context, key string, w io.WriterAt) (int64, error) {
	okey, err := s.objectKey(key)
	if err != nil {
		return 0, err
	}
	info, err := s.Stat(ctx, key)
	if err != nil {
		return 0, err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.conc)
	for off := int64(0); off < info.Size; off += s.partSize {
		g.Go(func() error {
			buf := s.getBuf()
			n := min(s.partSize, info.Size-off)
			if err := s.fetchRange(gctx, key, okey, info.ETag, off, (*buf)[:n]); err != nil {
				return err
			}
			if _, err := w.WriteAt((*buf)[:n], off); err != nil {
				return fmt.Errorf("s3store: download %q: write at %d: %w", key, off, err)
			}
			s.putBuf(buf)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	return info.Size, nil
}

// GetParallel opens the object at key for reading, like Get, but fetches
// up to Concurrency ranges of PartSize bytes ahead in parallel and yields
// them in order, so a single reader (io.Copy into a file and a hasher)
// gets the throughput of a parallel download in one pass. It holds at
// most Concurrency buffers of PartSize bytes. The caller closes it.
func (s *Store) GetParallel(ctx context.Context, key string) (io.ReadCloser, error) {
	okey, err := s.objectKey(key)
	if err != nil {
		return nil, err
	}
	info, err := s.Stat(ctx, key)
	if err != nil {
		return nil, err
	}
	if info.Size <= s.partSize {
		return s.Get(ctx, key)
	}
	ctx, cancel := context.WithCancel(ctx)
	pr := &parallelReader{
		s:      s,
		cancel: cancel,
		queue:  make(chan *chunk, s.conc),
		sem:    make(chan struct{}, s.conc),
	}
	pr.wg.Go(func() {
		defer close(pr.queue)
		for off := int64(0); off < info.Size; off += s.partSize {
			// A slot is taken before the fetch starts and given back when
			// the reader has consumed the chunk, which bounds the buffers.
			select {
			case pr.sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			c := &chunk{done: make(chan struct{}), buf: s.getBuf(), n: int(min(s.partSize, info.Size-off))}
			pr.queue <- c // never blocks: at most conc chunks hold slots
			pr.wg.Go(func() {
				defer close(c.done)
				c.err = s.fetchRange(ctx, key, okey, info.ETag, off, (*c.buf)[:c.n])
			})
		}
	})
	return pr, nil
}

type chunk struct {
	done chan struct{}
	buf  *[]byte
	n    int
	err  error
}

type parallelReader struct {
	s      *Store
	cancel context.CancelFunc
	queue  chan *chunk
	sem    chan struct{}
	wg     sync.WaitGroup
	cur    *chunk
	off    int
	err    error
	once   sync.Once
}

func (r *parallelReader) release(c *chunk) {
	r.s.putBuf(c.buf)
	<-r.sem
}

func (r *parallelReader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	for r.cur == nil || r.off == r.cur.n {
		if r.cur != nil {
			r.release(r.cur)
			r.cur = nil
		}
		c, ok := <-r.queue
		if !ok {
			r.err = io.EOF
			return 0, r.err
		}
		<-c.done
		if c.err != nil {
			r.release(c)
			r.err = c.err
			return 0, r.err
		}
		r.cur, r.off = c, 0
	}
	n := copy(p, (*r.cur.buf)[r.off:r.cur.n])
	r.off += n
	return n, nil
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
