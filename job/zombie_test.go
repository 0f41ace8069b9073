package job_test

import (
	"errors"
	"maps"
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

// A writer frozen inside the two-phase window (its prepared record
// persisted, its commit not yet made) and woken after another node took
// over: the new node rolls its transaction forward, the output holds
// every record exactly once, and the zombie, woken, changes nothing and
// stops fenced.
func TestZombieInTwoPhaseWindowChangesNothing(t *testing.T) {
	const n = 300
	for _, sk := range sinks {
		t.Run(sk.name, func(t *testing.T) {
			bucket := memstore.New()
			sink, output := sk.make(bucket)
			frozen, wake := make(chan string), make(chan struct{})
			freeze := crashAt(checkpoint.StepPersistPrepared, 2, checkpoint.HookHalt)
			hook := func(s checkpoint.Step, id string) checkpoint.HookAction {
				if freeze(s, id) == checkpoint.HookHalt { // the 2nd prepared record
					frozen <- id
					<-wake
				}
				return checkpoint.HookContinue
			}
			d1 := t.TempDir()
			zombie, err := job.Start(t.Context(), job.WithHook(job.Config{
				Storage: node(t, bucket, d1), Dir: d1, Source: &source{n: n, batch: 10},
				Processor: summer{}, Sink: sink(), EveryRecords: 50, State: smallState,
			}, hook))
			if err != nil {
				t.Fatal(err)
			}
			prepared := <-frozen

			d2 := t.TempDir()
			res, err := job.Run(t.Context(), job.Config{
				Storage: node(t, bucket, d2), Dir: d2, Source: &source{n: n, batch: 10},
				Processor: summer{}, Sink: sink(), EveryRecords: 50, State: smallState,
			})
			if err != nil {
				t.Fatalf("node 2: %v", err)
			}
			if res.Action != checkpoint.ActionPromote || res.Restored != prepared {
				t.Errorf("node 2 recovered %v %s, want the zombie's prepared %s rolled forward", res.Action, res.Restored, prepared)
			}
			checkExactlyOnce(t, output(t), n)
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
