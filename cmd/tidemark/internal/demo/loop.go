package demo

import (
	"context"
	"fmt"
	"time"

	"github.com/tidemark-io/tidemark/cmd/tidemark/internal/demofault"
)

// loop is the part of a job both shapes run alike (Run in one process,
// RunWorkers with the state on workers): read the source to its end in
// batches, cut a checkpoint every Interval or EveryRecords records and a
// final one, keep one checkpoint in flight at a time, hear of
// completions, and apply the injected faults. What differs — where a
// batch goes and how a checkpoint's state is taken — are its hooks.
type loop struct {
	src      *Source
	sink     *Sink
	faults   demofault.Faults
	batch    int
	interval time.Duration
	every    uint64

	// completed, fatal and halted are the Coordinator's completions, its
	// fatal errors and the crash hook's halt; halt halts.
	completed <-chan string
	fatal     <-chan error
	halted    <-chan struct{}
	halt      func()

	// apply folds one batch of records into the state and the output
	// pending for the next checkpoint.
	apply func(ctx context.Context, words []string) error
	// cut starts a new checkpoint (its barrier, state and staged output)
	// and returns its id.
	cut func(ctx context.Context) (string, error)
	// done hears of a completed checkpoint.
	done func(ctx context.Context, id string) error
	// afterBatch, if set, runs after each batch, past the crash fault.
	afterBatch func(ctx context.Context) error
	// tick reports progress, about once a second.
	tick func()

	// stop, once closed, drains the loop: it reads no further batch,
	// takes a final checkpoint of what it read and waits for it (see
	// Config.Stop). fresh says no checkpoint exists yet: the drain then
	// takes one even if it read nothing, so that there is one to resume.
	stop  <-chan struct{}
	fresh bool
	// stopped is set when run returned because of stop.
	stopped bool
}

// run reads the source to its end, checkpointing on the way, then takes
// the final checkpoint and waits for it.
func (l *loop) run(ctx context.Context) error {
	buf := make([]string, l.batch)
	var inFlight string // checkpoint cut but not yet completed
	lastCkpt, lastTick := time.Now(), time.Now()
	sinceCkpt := uint64(0)
	crashMarker := fmt.Sprintf("%s%d", CrashMarkerPrefix, l.faults.CrashAfter)
	crashArmed := false
	if l.faults.CrashAfter > 0 && l.src.Offset() < l.faults.CrashAfter {
		done, err := l.sink.bs.Exists(ctx, crashMarker)
		if err != nil {
			return fmt.Errorf("demo: read crash marker: %w", err)
		}
		crashArmed = !done
	}

	// stopped reports a fatal error of the Coordinator or a halt.
	stopped := func(err error, halted bool) error {
		if halted {
			return fmt.Errorf("demo: halted by hook: %w", ErrCrashed)
		}
		return fmt.Errorf("demo: %w", err) // the Coordinator's errors say "checkpoint: …"
	}
	// wait blocks until checkpoint id completed, the coordinator failed or
	// halted, or ctx is done.
	wait := func(id string) error {
		for {
			select {
			case got := <-l.completed:
				if err := l.done(ctx, got); err != nil {
					return err
				}
				if got >= id {
					return nil
				}
			case err := <-l.fatal:
				return stopped(err, false)
			case <-l.halted:
				return stopped(nil, true)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	take := func() error {
		// One checkpoint in flight at a time: the next is persisted only
		// after the previous completed anyway (the Coordinator finalizes
		// in order), and waiting here bounds the local state directories
		// and the staged output to one checkpoint.
		if inFlight != "" {
			if err := wait(inFlight); err != nil {
				return err
			}
			inFlight = ""
		}
		id, err := l.cut(ctx)
		if err != nil {
			return err
		}
		inFlight = id
		lastCkpt, sinceCkpt = time.Now(), 0
		return nil
	}

	taken := false
	for !l.src.Done() {
		if err := ctx.Err(); err != nil {
			return err
		}
		if l.draining() {
			l.stopped = true
			break
		}
		select {
		case err := <-l.fatal:
			return stopped(err, false)
		case <-l.halted:
			return stopped(nil, true)
		default:
		}
		n := l.src.Next(buf)
		if err := l.apply(ctx, buf[:n]); err != nil {
			return err
		}
		sinceCkpt += uint64(n)

		if crashArmed && l.src.Offset() >= l.faults.CrashAfter {
			if err := l.sink.bs.Put(ctx, crashMarker, stringsReader(time.Now().UTC().Format(time.RFC3339))); err != nil {
				return fmt.Errorf("demo: write crash marker: %w", err)
			}
			if l.faults.Crash != nil {
				l.faults.Crash() // the CLI's never returns
			}
			l.halt()
			return fmt.Errorf("demo: at offset %d: %w", l.src.Offset(), ErrCrashed)
		}
		if l.afterBatch != nil {
			if err := l.afterBatch(ctx); err != nil {
				return err
			}
		}
		if l.faults.Slow > 0 {
			select {
			case <-time.After(l.faults.Slow):
			case <-l.stop: // the next turn drains
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if time.Since(lastCkpt) >= l.interval || (l.every > 0 && sinceCkpt >= l.every) {
			if err := take(); err != nil {
				return err
			}
			taken = true
		}
		if time.Since(lastTick) >= time.Second {
			lastTick = time.Now()
			l.tick()
		}
		// Collect completions as they come, for progress and pruning.
		select {
		case got := <-l.completed:
			if err := l.done(ctx, got); err != nil {
				return err
			}
			if got == inFlight {
				inFlight = ""
			}
		default:
		}
	}

	// The final checkpoint, unless the last one already covers the end
	// (or, drained, where the loop stopped).
	if sinceCkpt > 0 || l.stopped && l.fresh && !taken {
		if err := take(); err != nil {
			return err
		}
	}
	if inFlight != "" {
		return wait(inFlight)
	}
	return nil
}

// draining reports whether the loop's stop is closed.
func (l *loop) draining() bool { return stopping(l.stop) }

// stopping reports whether stop (Config.Stop) is closed.
func stopping(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}
