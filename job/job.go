package job

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/savepoint"
)

// StopOptions configure Job.Stop.
type StopOptions struct {
	// Savepoint, if not empty, is the label of a savepoint of the final
	// checkpoint, written to the Storage's Blobstore (a
	// *blobstorage.Storage) with checkpoint.CreateSavepointWith, without
	// Replace: it never replaces an existing savepoint, and none is ever
	// collected (see Job.Stop: a label per deploy, `tidemark savepoint rm`).
	Savepoint string
}

// Job is a job started by Start. Its methods are safe for concurrent use.
type Job struct {
	cfg    Config
	cancel context.CancelFunc // kills the run: a crash-safe stop
	done   chan struct{}      // closed when the run returned
	res    Result
	err    error

	mu       sync.Mutex
	stopping chan struct{} // closed by the first Stop: drain
	label    string        // the savepoint the first Stop asked for
	saved    bool          // the savepoint was written (by the run or Stop)
}

// Start checks cfg, locks Config.Dir and starts the job in the
// background; see Run for what it does. Having touched nothing, it
// returns an error wrapping ErrConfig for a Config it refuses, and one
// wrapping ErrDirLocked when another job holds Dir. Cancelling ctx stops
// the job where it is, as a crash would: crash-safe, resumable. Dir stays
// locked until the job has returned (Wait).
func Start(ctx context.Context, cfg Config) (*Job, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	release, err := lockDir(cfg.Dir)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	j := &Job{cfg: cfg.withDefaults(), cancel: cancel, done: make(chan struct{}), stopping: make(chan struct{})}
	go func() {
		defer close(j.done)
		defer release() // before done: Dir is free once Wait returns
		defer cancel()
		r := &runner{cfg: j.cfg, job: j}
		j.res, j.err = r.run(ctx)
	}()
	return j, nil
}

// Run runs a job until its Source ends (io.EOF), then takes a final
// checkpoint, waits for it to complete and returns.
//
// It takes the writer role (Storage.Acquire, when the Storage has one),
// recovers rolling forward (a prepared checkpoint's transaction is
// committed again and the checkpoint restored; see the package doc),
// discards the sink's leftovers of dead writers (BlobSink), opens the
// state from the checkpoint restored (downloading it on an empty node;
// never from what Dir holds), seeks the Source to its offsets and
// processes batches, checkpointing every Interval or EveryRecords with
// at most one checkpoint in flight. It prunes older local state and runs
// GC after checkpoints complete.
//
// A writer that finds itself fenced (another node took over) stops at
// once with an error wrapping checkpoint.ErrFenced, touching nothing.
func Run(ctx context.Context, cfg Config) (Result, error) {
	j, err := Start(ctx, cfg)
	if err != nil {
		return Result{}, err
	}
	return j.Wait()
}

// Wait waits for the job to return and returns what it did.
func (j *Job) Wait() (Result, error) {
	<-j.done
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.res, j.err
}

// Stop stops the job with a final checkpoint: it stops reading the
// Source (the ctx of a pending Source.Next is cancelled), takes a
// checkpoint of everything read, waits for its commit and completion,
// writes the savepoint opts asks for, and returns the job's Result. A job
// resumed after it reprocesses nothing that was read before the stop.
//
// ctx bounds it all, even a Source, Processor or Sink that ignores its
// ctx: once ctx is done Stop cancels the job, as a crash would
// (crash-safe, resumable from the last checkpoint), and returns at once
// an error wrapping ctx's, with an empty Result if the job has not
// returned yet. Such a job ends in the background when the call it is in
// returns; Wait waits for it, and Dir stays locked until then. A second
// Stop waits for the first. A label that cannot name a new savepoint, or
// names one that exists, is refused before anything stops.
//
// Savepoints are never replaced nor collected: give each stop its own
// label (one per deploy, say) and delete the old ones with
// `tidemark savepoint rm`. Resuming from an older savepoint (a rollback)
// emits again, in new transactions, the output committed after it.
func (j *Job) Stop(ctx context.Context, opts StopOptions) (Result, error) {
	if opts.Savepoint != "" {
		if err := checkpoint.ValidateNewLabel(opts.Savepoint); err != nil {
			return Result{}, fmt.Errorf("job: stop: %w", err)
		}
		rs, ok := j.cfg.Storage.(checkpoint.BlobstoreBacked)
		if !ok {
			return Result{}, fmt.Errorf("%w: a savepoint needs a Storage on a Blobstore (checkpoint.BlobstoreBacked), not %T", ErrConfig, j.cfg.Storage)
		}
		// Refused before the drain; CreateSavepointWith still settles a race.
		// A ctx already done fails the check: the job is then cancelled
		// below like any Stop past its deadline, never left running.
		ok, err := rs.Blobstore().Exists(ctx, checkpoint.SavepointKey(opts.Savepoint))
		switch {
		case err != nil && ctx.Err() != nil:
		case err != nil:
			return Result{}, fmt.Errorf("job: stop: %w", err)
		case ok:
			return Result{}, fmt.Errorf("job: stop: savepoint %q: %w", opts.Savepoint, checkpoint.ErrSavepointExists)
		}
	}
	j.mu.Lock()
	select {
	case <-j.stopping:
	default:
		j.label = opts.Savepoint
		close(j.stopping)
	}
	j.mu.Unlock()

	select {
	case <-j.done:
	case <-ctx.Done():
		j.cancel()
		select {
		case <-j.done:
			res, err := j.Wait()
			return res, errors.Join(fmt.Errorf("job: stop: deadline passed, stopped as a crash would: %w", ctx.Err()), err)
		default:
			return Result{}, fmt.Errorf("job: stop: deadline passed: the job is cancelled, as a crash would be, and ends in the background (Wait): %w", ctx.Err())
		}
	}
	if res, err := j.Wait(); err != nil {
		return res, err
	}
	// The job may have ended (io.EOF) before it heard of the stop.
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.savepointLocked(ctx, &j.res); err != nil {
		return j.res, err
	}
	return j.res, nil
}

// stopRequested returns the channel Stop closes.
func (j *Job) stopRequested() <-chan struct{} { return j.stopping }

// savepoint writes the savepoint the first Stop asked for, once.
func (j *Job) savepoint(ctx context.Context, res *Result) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.savepointLocked(ctx, res)
}

func (j *Job) savepointLocked(ctx context.Context, res *Result) error {
	if j.label == "" || j.saved {
		return nil
	}
	bs := j.cfg.Storage.(checkpoint.BlobstoreBacked).Blobstore()
	id, _, err := checkpoint.CreateSavepointWith(ctx, j.cfg.Storage, bs, j.label, savepoint.Options{})
	if err != nil {
		return fmt.Errorf("job: stop: savepoint %q: %w", j.label, err)
	}
	j.saved = true
	res.Savepoint = checkpoint.SavepointKey(j.label)
	j.cfg.Logger.Info("job: savepoint written", "label", j.label, "checkpoint", id)
	return nil
}
