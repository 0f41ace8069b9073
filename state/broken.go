package state

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"syscall"
)

// ErrBroken is wrapped by every operation of a Store after a write failed
// inside Pebble (a full disk, an I/O error on the WAL): Pebble panics
// there, holding its commit lock, so the database cannot be used or even
// closed cleanly any more. The Store turns that panic into an error naming
// the file and the cause (for example ENOSPC) and refuses everything after
// it; the job stops, and its next run reopens the state from the last
// checkpoint.
var ErrBroken = errors.New("state: unusable after a failed write; reopen it from a checkpoint")

// recoverWrite turns a panic of Pebble's write path into an error in
// *err, marks the Store broken, and lets every other panic through. Call
// it deferred, right after acquire.
func (o *Owner) recoverWrite(op string, err *error) {
	r := recover()
	if r == nil {
		return
	}
	cause, ok := r.(error)
	if _, isRuntime := r.(runtime.Error); !ok || isRuntime {
		panic(r) // a bug, not a failed write
	}
	*err = o.errorf(op, nil, fmt.Errorf("%w: %w", ErrBroken, cause))
	o.s.markBroken(*err)
}

// markBroken makes err the answer to every later operation of the Store
// and wakes whoever waits on a flush (see flush).
func (s *Store) markBroken(err error) {
	s.life.Lock()
	defer s.life.Unlock()
	if s.broken == nil {
		s.broken = err
		close(s.brokenCh)
	}
}

// onBackgroundError is Pebble's BackgroundError listener. A flush or
// compaction that runs out of disk space is retried by Pebble for ever,
// and a checkpoint waiting on that flush would wait as long: the Store
// is marked broken instead, so that the job stops saying why.
func (s *Store) onBackgroundError(err error) {
	s.opts.Logger.Error("pebble: background error", "component", "pebble", "dir", s.dir, "err", err)
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		s.markBroken(fmt.Errorf("state: %s: %w: %w", s.dir, ErrBroken, err))
	}
}

// flush flushes o's memtable, waiting until it is done, the Store is
// marked broken, or ctx ends.
func (s *Store) flush(ctx context.Context, o *Owner) error {
	done, err := o.db.AsyncFlush()
	if err != nil {
		return err
	}
	select {
	case <-done:
		return nil
	case <-s.brokenCh:
		s.life.RLock()
		defer s.life.RUnlock()
		return s.broken
	case <-ctx.Done():
		return ctx.Err()
	}
}
