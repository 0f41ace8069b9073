package job

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/checkpoint"
)

// loop reads the source in batches, processes them and writes their
// output into the open transaction, cuts a checkpoint at the cadence
// with at most one in flight, and ends at io.EOF or a Stop with a final
// checkpoint it waits for.
func (r *runner) loop(ctx context.Context) error {
	cfg := r.cfg
	stop := r.job.stopRequested()
	// A Stop cancels a Next that waits for input; nothing was read then.
	readCtx, cancelRead := context.WithCancel(ctx)
	defer cancelRead()
	go func() {
		select {
		case <-stop:
			cancelRead()
		case <-readCtx.Done():
		}
	}()

	var inFlight string // checkpoint cut but not yet completed
	since, lastCut := uint64(0), time.Now()

	take := func() error {
		// One checkpoint in flight: the Coordinator finalizes in order
		// anyway, and this bounds local state dirs and staged output.
		if inFlight != "" {
			if err := r.wait(ctx, inFlight); err != nil {
				return err
			}
			inFlight = ""
		}
		id, err := r.cut(ctx)
		if err != nil {
			return err
		}
		inFlight, since, lastCut = id, 0, time.Now()
		return nil
	}

	for {
		if err := r.failed(ctx); err != nil {
			return err
		}
		if err := r.collect(ctx, &inFlight); err != nil {
			return err
		}
		recs, err := cfg.Source.Next(readCtx)
		eof := errors.Is(err, io.EOF)
		if err != nil && !eof {
			if stopped(stop) && ctx.Err() == nil {
				break // a drain interrupted the read
			}
			return fmt.Errorf("job: source: %w", err)
		}
		if len(recs) > 0 {
			if err := r.process(ctx, recs); err != nil {
				return err
			}
			since += uint64(len(recs))
		}
		if eof || stopped(stop) {
			break
		}
		due := time.Since(lastCut) >= cfg.Interval || (cfg.EveryRecords > 0 && since >= cfg.EveryRecords)
		if since > 0 && due {
			if err := take(); err != nil {
				return err
			}
		}
	}

	// The final checkpoint, unless the last one covers everything read.
	if since > 0 || r.res.Checkpoints == 0 && inFlight == "" && r.res.Restored == "" {
		if err := take(); err != nil {
			return err
		}
	}
	if inFlight != "" {
		if err := r.wait(ctx, inFlight); err != nil {
			return err
		}
	}
	if stopped(stop) {
		return r.job.savepoint(ctx, &r.res)
	}
	return nil
}

func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

// process applies one batch and writes its output.
func (r *runner) process(ctx context.Context, recs []Record) error {
	r.res.Records += uint64(len(recs))
	out, err := r.cfg.Processor.Process(ctx, r.st, recs)
	if err != nil {
		return fmt.Errorf("job: process: %w", err)
	}
	if len(out) > 0 {
		if err := r.cfg.Sink.Write(ctx, Txn{ID: r.next, Writer: r.writer}, out); err != nil {
			return fmt.Errorf("job: sink write %s: %w", r.next, err)
		}
	}
	r.observe(EventBatch, "")
	return nil
}

// cut takes checkpoint r.next: barrier, state snapshot, sink prepare. It
// returns its id and opens the next transaction.
func (r *runner) cut(ctx context.Context) (string, error) {
	cfg := r.cfg
	id := r.next
	txn := Txn{ID: id, Writer: r.writer}
	// Until OnSinkPrepared(id, nil) no record of id can be persisted, so
	// the transaction may be aborted on any failure here.
	abandon := func(err error) error {
		r.coord.OnSinkPrepared(id, err) // the Coordinator fails, aborting nothing
		if aerr := cfg.Sink.Abort(ctx, txn); aerr != nil {
			cfg.Logger.Warn("job: abort", "txn", txn.String(), "err", aerr)
		}
		return err
	}
	offsets, err := cfg.Source.Offsets()
	if err != nil {
		return "", abandon(fmt.Errorf("job: source offsets: %w", err))
	}
	// Recovery hands them back to Seek, and tidemark show prints them.
	if len(offsets) > 0 && !json.Valid(offsets) {
		return "", abandon(fmt.Errorf("job: source offsets %.40q are not JSON (Source.Offsets)", offsets))
	}
	// The barrier: offsets, state and output are cut between two batches.
	r.coord.OnBarrierInjected(id, offsets)
	// A local directory of a new id is a crashed run's leftover: clear
	// it, or the state checkpoint refuses.
	if err := r.removeStateDir(id); err != nil {
		return "", abandon(fmt.Errorf("job: clear leftover state of %s: %w", id, err))
	}
	dirs, err := r.st.Checkpoint(ctx, cfg.Storage.StateDir(id))
	if err != nil {
		return "", abandon(fmt.Errorf("job: state checkpoint %s: %w", id, err))
	}
	r.local = append(r.local, id)
	r.coord.OnStateSnapshot(id, map[string][]byte{operatorKey: r.ops}, dirs)
	if err := cfg.Sink.Prepare(ctx, txn); err != nil {
		return "", abandon(fmt.Errorf("job: sink prepare %s: %w", txn, err))
	}
	r.coord.OnSinkPrepared(id, nil)
	next, err := checkpoint.NextID(id)
	if err != nil {
		return "", fmt.Errorf("job: %w", err)
	}
	r.next = next
	return id, nil
}

// failed reports a fatal Coordinator error, a halt or ctx's end.
func (r *runner) failed(ctx context.Context) error {
	select {
	case err := <-r.coord.Fatal():
		return err // it says "checkpoint: <id>: <step>: …"
	case <-r.halted:
		return errHalted
	default:
	}
	return ctx.Err()
}

// collect hears of completions without waiting.
func (r *runner) collect(ctx context.Context, inFlight *string) error {
	for {
		select {
		case id := <-r.completed:
			if err := r.done(ctx, id); err != nil {
				return err
			}
			if id == *inFlight {
				*inFlight = ""
			}
		default:
			return nil
		}
	}
}

// wait blocks until checkpoint id completed, the Coordinator failed or
// halted, or ctx is done.
func (r *runner) wait(ctx context.Context, id string) error {
	for {
		select {
		case got := <-r.completed:
			if err := r.done(ctx, got); err != nil {
				return err
			}
			if got >= id {
				return nil
			}
		case err := <-r.coord.Fatal():
			return err
		case <-r.halted:
			return errHalted
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// done hears of completed checkpoint id: it prunes the local state of
// older ones and runs GC after the run's first checkpoint (what crashed
// runs left: a job that restarts often would otherwise never collect)
// and then every GCEvery. Only a fenced GC is an error.
func (r *runner) done(ctx context.Context, id string) error {
	r.res.Checkpoints++
	r.res.Last = id
	if _, ok := r.cfg.Storage.(checkpoint.StateDirRemover); ok {
		keep := r.local[:0]
		for _, old := range r.local {
			if old < id {
				_ = r.removeStateDir(old)
				continue
			}
			keep = append(keep, old)
		}
		r.local = keep
	}
	r.observe(EventCheckpoint, id)
	g, ok := r.cfg.Storage.(*blobstorage.Storage)
	if !ok || r.cfg.GCEvery < 0 || (r.res.Checkpoints != 1 && r.res.Checkpoints%r.cfg.GCEvery != 0) {
		return nil
	}
	if _, err := g.GC(ctx, blobstorage.GCOptions{}); errors.Is(err, checkpoint.ErrFenced) {
		return fmt.Errorf("job: gc: %w", err)
	} else if err != nil {
		r.cfg.Logger.Warn("job: gc", "err", err)
	}
	return nil
}
