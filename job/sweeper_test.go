package job_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/tidemark-io/tidemark/blobstore/memstore"
	"github.com/tidemark-io/tidemark/job"
)

// sweepingSink is contractSink plus a Sweeper written from its doc only:
// it drops the uncommitted transactions of other, older writers and
// reports the greatest id it saw.
type sweepingSink struct {
	*contractSink
	mu     sync.Mutex
	sweeps []string // the writers Sweep was called with
}

func (s *sweepingSink) Sweep(_ context.Context, writer string) (string, error) {
	s.mu.Lock()
	s.sweeps = append(s.sweeps, writer)
	s.mu.Unlock()
	l := s.l
	l.mu.Lock()
	defer l.mu.Unlock()
	last := ""
	for txn := range l.prepared {
		last = max(last, txn.ID)
		if txn.Writer < writer && !l.committed[txn] { // "e<n>": one digit here
			delete(l.prepared, txn)
		}
	}
	return last, nil
}

var _ job.Sweeper = (*sweepingSink)(nil)

// diesInPrepare stages its n-th transaction, then fails as a process that
// died before the record was persisted would: no Abort follows.
type diesInPrepare struct {
	*sweepingSink
	n, seen int
}

var errDied = errors.New("died after staging")

func (s *diesInPrepare) Prepare(ctx context.Context, txn job.Txn) error {
	if err := s.sweepingSink.Prepare(ctx, txn); err != nil {
		return err
	}
	if s.seen++; s.seen == s.n {
		return errDied
	}
	return nil
}

func (s *diesInPrepare) Abort(context.Context, job.Txn) error { return nil }

// A custom Sweeper is called once per run with the run's writer, its
// cleanup drops the dead writer's staged transaction, and the id it
// reports is never used again: the next writer's ids start after it.
func TestCustomSweeperCleansAndIDsAreNotReused(t *testing.T) {
	const n = 300
	bucket := memstore.New()
	l := newLedger()
	sink := &sweepingSink{contractSink: l.sink()}
	d := t.TempDir()
	cfg := job.Config{
		Storage: node(t, bucket, d), Dir: d, Source: &source{n: n, batch: 10},
		Processor: summer{}, Sink: &diesInPrepare{sweepingSink: sink, n: 2}, EveryRecords: 50, State: smallState,
	}
	resA, err := job.Run(t.Context(), cfg)
	if !errors.Is(err, errDied) {
		t.Fatalf("run A: %v, want it to die in Prepare", err)
	}
	var leftover job.Txn
	l.mu.Lock()
	for txn := range l.prepared {
		if !l.committed[txn] {
			leftover = txn
		}
	}
	l.mu.Unlock()
	if leftover.Writer != resA.Writer {
		t.Fatalf("no staged leftover of run A (%s) in %v", resA.Writer, l.prepared)
	}

	cfg.Source, cfg.Sink = &source{n: n, batch: 10}, sink
	resB, err := job.Run(t.Context(), cfg)
	if err != nil {
		t.Fatalf("run B: %v", err)
	}
	if want := []string{resA.Writer, resB.Writer}; len(sink.sweeps) != 2 || sink.sweeps[0] != want[0] || sink.sweeps[1] != want[1] {
		t.Errorf("Sweep called with %v, want %v", sink.sweeps, want)
	}
	l.mu.Lock()
	for txn := range l.prepared {
		if txn == leftover {
			t.Errorf("the sweep kept %s", leftover)
		}
		if txn.Writer == resB.Writer && txn.ID <= leftover.ID {
			t.Errorf("run B reused id %s (the leftover was %s)", txn, leftover)
		}
	}
	l.mu.Unlock()
	checkExactlyOnce(t, l.output(), n)
}
