package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
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

// Transferred adds the bytes the caller reads from the store (Get and
// GetRange) to the bar, so that a *progress observes a store
// (blobstore.Observe) as it is read. A nil *progress observes nothing.
func (p *progress) Transferred(op blobstore.Op, _ string, n int) {
	if op == blobstore.OpGet || op == blobstore.OpGetRange {
		p.add(n)
	}
}

// Done does nothing: the bar counts bytes, not operations.
func (p *progress) Done(blobstore.Op, string, int64, time.Duration, error) {}

// observed returns bs with the bytes read from it drawn on p.
func (p *progress) observed(bs blobstore.Blobstore) blobstore.Blobstore {
	return blobstore.Observe(bs, p)
}

// uploads counts the bytes and objects of the successful puts of an
// observed store (the demo's "uploaded" figures).
type uploads struct {
	bytes, objects atomic.Int64
}

// Transferred does nothing: uploads counts what completed.
func (u *uploads) Transferred(blobstore.Op, string, int) {}

// Done counts a successful put.
func (u *uploads) Done(op blobstore.Op, _ string, n int64, _ time.Duration, err error) {
	if err == nil && (op == blobstore.OpPut || op == blobstore.OpPutIfAbsent || op == blobstore.OpPutIfMatch) {
		u.bytes.Add(n)
		u.objects.Add(1)
	}
}
