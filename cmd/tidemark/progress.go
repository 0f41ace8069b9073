package main

import (
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/tidemark-io/tidemark/blobstore"
	"golang.org/x/term"
)

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

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

// progress draws a progress bar for a long transfer (schollz/progressbar:
// rate, ETA and the terminal's width). A nil *progress draws nothing
// (app.newProgress returns nil when no bar is wanted).
type progress struct {
	bar *progressbar.ProgressBar
}

func newBar(w io.Writer, label string, total int64) *progress {
	max := total
	if max <= 0 {
		max = -1 // unknown: a spinner with the bytes and the rate
	}
	return &progress{bar: progressbar.NewOptions64(max,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(label),
		progressbar.OptionShowBytes(true),
		progressbar.OptionShowTotalBytes(true),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionFullWidth(),
		progressbar.OptionThrottle(200*time.Millisecond),
		progressbar.OptionShowElapsedTimeOnFinish(),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }),
		progressbar.OptionSetTheme(progressbar.Theme{Saucer: "=", SaucerHead: ">", SaucerPadding: " ", BarStart: "[", BarEnd: "]"}),
	)}
}

func (p *progress) add(n int) {
	if p == nil {
		return
	}
	_ = p.bar.Add(n)
}

// done draws the final state and ends the line.
func (p *progress) done() {
	if p == nil {
		return
	}
	_ = p.bar.Finish()
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
