package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/tidemark-io/tidemark/blobstore"
)

// isTerminal reports whether f is a character device (a terminal). It
// avoids a dependency on golang.org/x/term, which is not in go.sum; a
// character device that is not a terminal (/dev/null) only makes progress
// lines go where nobody reads them.
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// humanBytes formats n as "12.3 MiB".
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// humanAge formats a duration as "3s", "4m", "2h", "5d".
func humanAge(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// progress draws a one-line progress bar on a terminal for a long
// transfer. A nil *progress draws nothing (app.newProgress returns nil when
// no bar is wanted).
type progress struct {
	w     io.Writer
	label string
	total int64 // 0: unknown

	mu    sync.Mutex
	n     int64
	last  time.Time
	drawn bool
}

func (p *progress) add(n int) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n += int64(n)
	if time.Since(p.last) < 200*time.Millisecond {
		return
	}
	p.last = time.Now()
	p.drawLocked()
}

func (p *progress) drawLocked() {
	p.drawn = true
	if p.total <= 0 {
		fmt.Fprintf(p.w, "\r%s: %s   ", p.label, humanBytes(p.n))
		return
	}
	const width = 30
	frac := min(float64(p.n)/float64(p.total), 1)
	bar := make([]byte, width)
	for i := range bar {
		bar[i] = ' '
		if float64(i) < frac*width {
			bar[i] = '='
		}
	}
	fmt.Fprintf(p.w, "\r%s [%s] %3.0f%% %s / %s   ", p.label, bar, frac*100, humanBytes(p.n), humanBytes(p.total))
}

// done draws the final state and ends the line.
func (p *progress) done() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn || p.n > 0 {
		p.drawLocked()
		fmt.Fprintln(p.w)
	}
}

// progressReader counts what is read through it into a progress.
type progressReader struct {
	io.ReadCloser
	p *progress
}

func (r progressReader) Read(b []byte) (int, error) {
	n, err := r.ReadCloser.Read(b)
	r.p.add(n)
	return n, err
}

// progressStore is a Blobstore decorator that counts the bytes read by Get
// into a progress.
type progressStore struct {
	blobstore.Blobstore
	p *progress
}

func (s progressStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	rc, err := s.Blobstore.Get(ctx, key)
	if err != nil {
		return rc, err
	}
	return progressReader{ReadCloser: rc, p: s.p}, nil
}
