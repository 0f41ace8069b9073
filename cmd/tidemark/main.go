// Command tidemark runs the Tidemark demo job and operates on the
// checkpoints and savepoints of any store.
//
// # Commands
//
//	tidemark demo                      word-count job: checkpoints, crash, resume, exactly-once check
//	tidemark ls                        checkpoints and savepoints with status, size and age
//	tidemark show ID                   one checkpoint: record, offsets, files
//	tidemark verify ID|LABEL           re-read a checkpoint or savepoint and check every digest
//	tidemark savepoint create LABEL    archive the latest completed checkpoint
//	tidemark savepoint restore LABEL   make a savepoint the latest completed checkpoint
//	tidemark savepoint ls|rm LABEL     list, remove savepoints
//	tidemark savepoint cp LABEL SRC DST  copy a savepoint between stores, verifying it
//	tidemark gc [--dry-run] [--keep N] apply retention, delete what nothing needs
//	tidemark probe                     check that the store enforces conditional writes
//
// The store is a URL (--store or $TIDEMARK_STORE): file:///dir, s3://bucket/prefix?…
//
// # Exit codes
//
//	0  success
//	1  error (store unreachable, not found, fenced, …)
//	2  usage (unknown command or flag, wrong arguments)
//	3  verification failed: corrupt data, the demo's exactly-once check failed,
//	   or probe found that the endpoint ignores conditional writes
//	130 interrupted (Ctrl-C); 143 terminated (SIGTERM; for the demo, a
//	    second signal or a drain past --stop-timeout: a clean stop on
//	    SIGTERM exits 0); 137 the demo's --crash-after-records crash
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/cmd/tidemark/internal/demo"
	_ "github.com/tidemark-io/tidemark/filestore" // file://
	_ "github.com/tidemark-io/tidemark/s3store"   // s3://
)

// Exit codes.
const (
	exitOK          = 0
	exitError       = 1
	exitUsage       = 2
	exitVerify      = 3
	exitInterrupted = 130
	exitCrashed     = 137
)

func main() {
	sigs := newSignals()
	code := run(sigs.ctx, os.Args[1:], env{
		stdin:     os.Stdin,
		stdout:    os.Stdout,
		stderr:    os.Stderr,
		getenv:    os.Getenv,
		terminal:  isTerminal(os.Stdout) && isTerminal(os.Stderr),
		crash:     func() { os.Exit(exitCrashed) },
		terminate: sigs.drainOn,
	})
	sigs.stop()
	os.Exit(code)
}

// signalError is the cause of a command's context when a signal stops
// it: the exit code is then 128 + the signal's number (130 for Ctrl-C,
// 143 for SIGTERM), as shells report.
type signalError struct{ sig os.Signal }

func (e signalError) Error() string {
	switch e.sig {
	case syscall.SIGINT:
		return "interrupted (SIGINT, Ctrl-C)"
	case syscall.SIGTERM:
		return "interrupted (SIGTERM)"
	}
	return "interrupted by " + e.sig.String()
}

// stopTimeoutError is the cause of a command's context when a graceful
// stop (SIGTERM on the demo) outlasts its --stop-timeout: it stops as
// on a second signal, with exit 143.
type stopTimeoutError struct{ d time.Duration }

func (e stopTimeoutError) Error() string {
	return fmt.Sprintf("interrupted (SIGTERM, then the stop timeout %v ran out)", e.d)
}

func (e stopTimeoutError) Unwrap() error { return signalError{syscall.SIGTERM} }

// signals turns SIGINT and SIGTERM into the cancellation of ctx, with a
// signalError cause. A command that can stop gracefully (the demo) asks
// for SIGTERM with drainOn: the first SIGTERM then closes the channel it
// returned instead, and ctx is cancelled only by a second signal or the
// stop timeout. SIGINT always cancels at once: Ctrl-C is the crash of
// the quick start.
type signals struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	ch     chan os.Signal

	mu      sync.Mutex
	drain   chan struct{} // nil until drainOn
	timeout time.Duration
	timer   *time.Timer // the stop timeout, once draining
}

// newSignals starts listening for SIGINT and SIGTERM.
func newSignals() *signals {
	s := signalsOn(make(chan os.Signal, 2))
	signal.Notify(s.ch, os.Interrupt, syscall.SIGTERM)
	return s
}

// signalsOn handles the signals ch delivers (the tests' seam).
func signalsOn(ch chan os.Signal) *signals {
	ctx, cancel := context.WithCancelCause(context.Background())
	s := &signals{ctx: ctx, cancel: cancel, ch: ch}
	go s.loop()
	return s
}

func (s *signals) loop() {
	for {
		select {
		case sig := <-s.ch:
			if !s.startDrain(sig) {
				s.cancel(signalError{sig})
			}
		case <-s.ctx.Done():
			return
		}
	}
}

// startDrain starts a graceful stop for the first SIGTERM, if a command
// asked for one, and reports whether it did.
func (s *signals) startDrain(sig os.Signal) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sig != syscall.SIGTERM || s.drain == nil || s.timer != nil {
		return false
	}
	close(s.drain)
	d := s.timeout
	s.timer = time.AfterFunc(d, func() { s.cancel(stopTimeoutError{d}) })
	return true
}

// drainOn makes the first SIGTERM close the returned channel, leaving
// the command timeout to drain before ctx is cancelled.
func (s *signals) drainOn(timeout time.Duration) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.drain == nil {
		s.drain, s.timeout = make(chan struct{}), timeout
	}
	return s.drain
}

// stop releases the signals.
func (s *signals) stop() {
	signal.Stop(s.ch)
	s.mu.Lock()
	if s.timer != nil {
		s.timer.Stop()
	}
	s.mu.Unlock()
	s.cancel(nil)
}

// env is what a run of the command sees of the world; tests supply their
// own.
type env struct {
	stdout, stderr io.Writer
	// stdin is read by savepoint import -; nil: there is none.
	stdin  io.Reader
	getenv func(string) string
	// terminal enables progress bars for long transfers.
	terminal bool
	// crash ends the process abruptly (the demo's --crash-after-records);
	// nil makes the demo stop as if crashed and exit 137 without exiting.
	crash func()
	// terminate, if set, makes SIGTERM a graceful stop (see signals): it
	// returns the channel the first SIGTERM closes, after which the
	// command has timeout to finish. Nil: SIGTERM cancels at once.
	terminate func(timeout time.Duration) <-chan struct{}
}

// usageError marks errors in how the command was called (exit 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// quietError is an error the command has already told the user about
// in its own words (the demo's "interrupted at record …"): run sets the
// exit code from it but prints nothing more in text (with --output json
// the error is still written as JSON).
type quietError struct{ err error }

func (e quietError) Error() string { return e.err.Error() }
func (e quietError) Unwrap() error { return e.err }

// errVerify marks a failed verification that is not corrupt (exit 3).
var errVerify = errors.New("verification failed")

// run executes the command line args and returns the exit code.
func run(ctx context.Context, args []string, e env) int {
	// The logger and the command write to the same streams from several
	// goroutines (uploads, the job's progress): one write at a time.
	e.stdout, e.stderr = &syncWriter{w: e.stdout}, &syncWriter{w: e.stderr}
	a := &app{env: e}
	ctx = withGetenv(ctx, e.getenv)
	root := a.rootCmd()
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if a.cancel != nil {
		defer a.cancel()
	}
	if err == nil {
		return exitOK
	}
	if a.cmdCtx != nil && errors.Is(context.Cause(a.cmdCtx), errTimedOut) && !strings.Contains(err.Error(), errTimedOut.Error()) {
		err = fmt.Errorf("%w: %w", context.Cause(a.cmdCtx), err)
	}
	// A signal cancels the command's context: say so, rather than leave
	// the user with a bare "context canceled" from deep in the call.
	err = interruptedError(ctx, err)
	code := exitCode(ctx, err)
	// a.output holds --output as far as the command line was parsed.
	if a.output == "json" {
		writeJSON(e.stderr, map[string]any{"error": err.Error(), "exit_code": code})
	} else {
		if !errors.As(err, new(quietError)) {
			fmt.Fprintf(e.stderr, "tidemark: %v\n", err)
		}
		if code == exitUsage {
			fmt.Fprintln(e.stderr, "Run 'tidemark --help' (or 'tidemark COMMAND --help') for usage.")
		}
	}
	return code
}

// interruptedError returns err, said to be an interruption first when a
// signal stopped the command (the error the command ended on comes from
// deep in the call: "context canceled", or the signal in passing).
func interruptedError(ctx context.Context, err error) error {
	var se signalError
	if errors.As(context.Cause(ctx), &se) && stoppedBy(ctx, err) && !strings.HasPrefix(err.Error(), se.Error()) && !errors.As(err, new(quietError)) {
		return fmt.Errorf("%w: %w", se, err)
	}
	return err
}

// stoppedBy reports whether err is how a command ended because ctx was
// cancelled (by a signal): it wraps context.Canceled, or the cancellation's
// cause itself (some stores return context.Cause(ctx)).
func stoppedBy(ctx context.Context, err error) bool {
	if ctx.Err() == nil {
		return false
	}
	return errors.Is(err, context.Canceled) || errors.Is(err, context.Cause(ctx))
}

// exitCode classifies err.
func exitCode(ctx context.Context, err error) int {
	var ue usageError
	switch {
	case errors.As(err, &ue):
		return exitUsage
	case corrupt(err), errors.Is(err, blobstore.ErrChecksum), errors.Is(err, errVerify), errors.Is(err, demo.ErrNotExactlyOnce):
		// ErrChecksum: the store's own checksum of an object failed.
		return exitVerify
	case stoppedBy(ctx, err):
		var se signalError
		if errors.As(context.Cause(ctx), &se) {
			if n, ok := se.sig.(syscall.Signal); ok {
				return 128 + int(n)
			}
		}
		return exitInterrupted
	case errors.Is(err, blobstore.ErrInvalidURL):
		return exitUsage
	case errors.Is(err, demo.ErrCrashed):
		return exitCrashed
	}
	return exitError
}

// syncWriter serialises writes to w, which need not be safe for
// concurrent use (a test's bytes.Buffer).
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
