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
	fl.StringVar(&f.savepoint, "savepoint-on-stop", "", "on SIGTERM, after the final checkpoint, also archive it as savepoint LABEL (replacing a savepoint of that label), within --stop-timeout")
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

// finishStop reports a run that SIGTERM stopped after its final
// checkpoint, archiving it first as --savepoint-on-stop.
func (a *app) finishStop(ctx context.Context, f demoFlags, res demo.Result, st checkpoint.Storage, bs blobstore.Blobstore, summary map[string]any, say func(string, ...any)) error {
	summary["stopped"] = true
	summary["savepoint"] = f.savepoint
	saved := ""
	if f.savepoint != "" {
		id, err := checkpoint.CreateSavepoint(ctx, st, bs, f.savepoint)
		if err != nil {
			return fmt.Errorf("demo: stopped at checkpoint %s, but savepoint %s: %w", orNone(res.LastID), f.savepoint, err)
		}
		if id != res.LastID {
			return fmt.Errorf("demo: stopped at checkpoint %s, but savepoint %s archived checkpoint %s: another writer took over", orNone(res.LastID), f.savepoint, id)
		}
		saved = fmt.Sprintf(", archived as savepoint %s", f.savepoint)
	}
	line := fmt.Sprintf("stopped (SIGTERM) at record %d of %d: final checkpoint %s completed%s", res.EndOffset, f.records, orNone(res.LastID), saved)
	a.emit(summary, func(w io.Writer) { fmt.Fprintln(w, line) })
	say("drained within --stop-timeout %v. Run the same command again (on any node) to resume from record %d.", f.stopTimeout, res.EndOffset)
	return nil
}
