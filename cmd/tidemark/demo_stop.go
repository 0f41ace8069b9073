package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/cmd/tidemark/internal/demo"
)

// defaultStopTimeout bounds a graceful stop: inside Kubernetes' default
// grace period of 30 s, and a spot instance's two-minute notice.
const defaultStopTimeout = 25 * time.Second

// stopFlags are the demo's flags of a graceful stop (SIGTERM).
type stopFlags struct {
	stopTimeout time.Duration
	savepoint   string // --savepoint-on-stop
}

func addStopFlags(cmd *cobra.Command, f *stopFlags) {
	fl := cmd.Flags()
	fl.DurationVar(&f.stopTimeout, "stop-timeout", defaultStopTimeout, "on SIGTERM, drain, take a final checkpoint and exit 0 within this long; past it (or at a second signal) stop as on a crash (exit 143)")
	fl.StringVar(&f.savepoint, "savepoint-on-stop", "", "on SIGTERM, after the final checkpoint, also archive it as savepoint LABEL, within --stop-timeout (a label that is taken is refused at the start: a stop never replaces a savepoint)")
}

func (f stopFlags) check() error {
	if f.stopTimeout <= 0 {
		return usagef("demo: --stop-timeout must be positive, not %v", f.stopTimeout)
	}
	if f.savepoint != "" {
		if err := checkpoint.ValidateNewLabel(f.savepoint); err != nil {
			return usagef("demo: --savepoint-on-stop: %v", err)
		}
	}
	return nil
}

// stopOn returns the channel the first SIGTERM closes (nil when this run
// does not hear signals: a test in the same process).
func (a *app) stopOn(f stopFlags) <-chan struct{} {
	if a.env.terminate == nil {
		return nil
	}
	return a.env.terminate(f.stopTimeout)
}

// refuseTakenLabel refuses, before the job runs, a --savepoint-on-stop
// label that names a savepoint: a stop never replaces one.
func refuseTakenLabel(ctx context.Context, f stopFlags, bs blobstore.Blobstore) error {
	if f.savepoint == "" {
		return nil
	}
	ok, err := bs.Exists(ctx, checkpoint.SavepointKey(f.savepoint))
	if err != nil {
		return fmt.Errorf("demo: --savepoint-on-stop: %w", err)
	}
	if ok {
		return fmt.Errorf("demo: --savepoint-on-stop %s: the store has a savepoint of that label, and a stop never replaces one (tidemark savepoint rm %s, or choose another label)", f.savepoint, f.savepoint)
	}
	return nil
}

// finishStop reports a run that SIGTERM stopped after its final
// checkpoint (and the savepoint of --savepoint-on-stop, which the run
// wrote).
func (a *app) finishStop(f demoFlags, res demo.Result, summary map[string]any, say func(string, ...any)) error {
	summary["stopped"] = true
	summary["savepoint"] = res.Savepoint
	saved := ""
	if res.Savepoint != "" {
		saved = fmt.Sprintf(", archived as savepoint %s", f.savepoint)
	}
	line := fmt.Sprintf("stopped (SIGTERM) at record %d of %d: final checkpoint %s completed%s", res.EndOffset, f.records, orNone(res.LastID), saved)
	a.emit(summary, func(w io.Writer) { fmt.Fprintln(w, line) })
	say("drained within --stop-timeout %v. Run the same command again (on any node) to resume from record %d.", f.stopTimeout, res.EndOffset)
	return nil
}
