package job_test

import (
	"context"
	"errors"
	"maps"
	"os"
	"sync/atomic"
	"testing"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/memstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/job"
)

// snapshot returns every key of bucket with its ETag.
func snapshot(t *testing.T, bucket blobstore.Blobstore) map[string]string {
	t.Helper()
	m := map[string]string{}
	for info, err := range bucket.List(t.Context(), "") {
		if err != nil {
			t.Fatal(err)
		}
		m[info.Key] = info.ETag
	}
	return m
}

// freezingSink freezes the loop inside the nth Prepare, after it
// succeeded: the checkpoint's output is prepared, its record not saved.
type freezingSink struct {
	job.Sink
	n            int32
	seen         atomic.Int32
	frozen, wake chan string
}

func (s *freezingSink) Prepare(ctx context.Context, txn job.Txn) error {
	err := s.Sink.Prepare(ctx, txn)
	if s.seen.Add(1) == s.n {
		s.frozen <- txn.ID
		<-s.wake
	}
	return err
}

// A writer frozen at each point of the two-phase window — output
// prepared but record not saved, record saved as prepared but not
// committed, committed but not completed — and woken after another node
// took over: the new node rolls a saved record forward (and drops what
// no record names), the output holds every record exactly once, and the
// zombie, woken, changes nothing in the bucket and stops fenced.
func TestZombieInTwoPhaseWindowChangesNothing(t *testing.T) {
	const n = 300
	for _, sk := range sinks {
		for _, at := range []string{"prepared-output", string(checkpoint.StepPersistPrepared), string(checkpoint.StepSinkCommitted)} {
			t.Run(sk.name+"/"+at, func(t *testing.T) {
				bucket := memstore.New()
				sink, output := sk.make(bucket)
				frozen, wake := make(chan string), make(chan struct{})
				cfg := job.Config{
					Dir: t.TempDir(), Source: &source{n: n, batch: 10},
					Processor: summer{}, Sink: sink(), EveryRecords: 50, State: smallState,
				}
				cfg.Storage = node(t, bucket, cfg.Dir)
				if at == "prepared-output" {
					fs := &freezingSink{Sink: cfg.Sink, n: 2, frozen: make(chan string), wake: make(chan string)}
					cfg.Sink = fs
					go func() { frozen <- <-fs.frozen; <-wake; close(fs.wake) }()
				} else {
					freeze := crashAt(checkpoint.Step(at), 2, checkpoint.HookHalt)
					cfg = job.WithHook(cfg, func(s checkpoint.Step, id string) checkpoint.HookAction {
						if freeze(s, id) == checkpoint.HookHalt {
							frozen <- id
							<-wake
						}
						return checkpoint.HookContinue
					})
				}
				zombie, err := job.Start(t.Context(), cfg)
				if err != nil {
					t.Fatal(err)
				}
				id := <-frozen

				d2 := t.TempDir()
				res, err := job.Run(t.Context(), job.Config{
					Storage: node(t, bucket, d2), Dir: d2, Source: &source{n: n, batch: 10},
					Processor: summer{}, Sink: sink(), EveryRecords: 50, State: smallState,
				})
				if err != nil {
					t.Fatalf("node 2: %v", err)
				}
				saved := at != "prepared-output"
				if saved && (res.Action != checkpoint.ActionPromote || res.Restored != id) {
					t.Errorf("node 2 recovered %v %s, want the zombie's prepared %s rolled forward", res.Action, res.Restored, id)
				}
				if !saved && res.Restored >= id {
					t.Errorf("node 2 restored %s, which the zombie never saved", res.Restored)
				}
				checkExactlyOnce(t, output(t), n)
				if sk.name == "blob" {
					checkSwept(t, bucket)
				}
				before := snapshot(t, bucket)

				close(wake)
				if _, err := zombie.Wait(); !errors.Is(err, checkpoint.ErrFenced) {
					t.Errorf("zombie: %v, want fenced", err)
				}
				if after := snapshot(t, bucket); !maps.Equal(before, after) {
					t.Errorf("the zombie changed the bucket:\nbefore %v\nafter  %v", before, after)
				}
				checkExactlyOnce(t, output(t), n)
			})
		}
	}
}

// A zombie's local state directory of an id its successor then completed
// with other contents is not resumed from when the zombie's node restarts
// on its own disk: the state comes from the record, exactly once.
func TestSameDiskRestartAfterZombieLeftover(t *testing.T) {
	const n = 300
	bucket := memstore.New()
	// A sink without BlobSink's sweep: B then reuses A's id (BlobSink's
	// sweep would tell B the id was staged, and B would skip it).
	l := newLedger()
	dA, dB := t.TempDir(), t.TempDir()
	fs := &freezingSink{Sink: l.sink(), n: 2, frozen: make(chan string), wake: make(chan string)}
	zombie, err := job.Start(t.Context(), job.Config{
		Storage: node(t, bucket, dA), Dir: dA, Source: &source{n: n, batch: 10},
		Processor: summer{}, Sink: fs, EveryRecords: 50, State: smallState,
	})
	if err != nil {
		t.Fatal(err)
	}
	id := <-fs.frozen // A's state directory of id is on disk A, its record unsaved

	// B takes over and completes id itself, with other contents (other
	// batches), then dies.
	res, err := job.Run(t.Context(), job.WithHook(job.Config{
		Storage: node(t, bucket, dB), Dir: dB, Source: &source{n: n, batch: 7},
		Processor: summer{}, Sink: l.sink(), EveryRecords: 50, State: smallState,
	}, crashAt(checkpoint.StepPersistCompleted, 1, checkpoint.HookHalt)))
	if !errors.Is(err, job.ErrHalted) || res.Checkpoints != 0 {
		t.Fatalf("node B: %+v %v", res, err)
	}
	if latest, err := node(t, bucket, dB).LoadLatestCompleted(t.Context()); err != nil || latest == nil || latest.ID != id {
		t.Fatalf("node B completed %v (%v), want %s", latest, err, id)
	}
	close(fs.wake)
	if _, err := zombie.Wait(); !errors.Is(err, checkpoint.ErrFenced) {
		t.Fatalf("zombie: %v, want fenced", err)
	}

	// A restarts on its own disk, which holds its own state of id.
	if _, err := os.Stat(node(t, bucket, dA).StateDir(id)); err != nil {
		t.Fatalf("no leftover of %s on disk A: %v", id, err)
	}
	res, err = job.Run(t.Context(), job.Config{
		Storage: node(t, bucket, dA), Dir: dA, Source: &source{n: n, batch: 10},
		Processor: summer{}, Sink: l.sink(), EveryRecords: 50, State: smallState,
	})
	if err != nil {
		t.Fatalf("node A again: %v", err)
	}
	if res.Restored != id {
		t.Errorf("node A restored %s, want %s", res.Restored, id)
	}
	checkExactlyOnce(t, l.output(), n)
}
