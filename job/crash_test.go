package job_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/memstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/job"
	"github.com/tidemark-io/tidemark/job/jobtest"
)

// sinks makes, per test, the sink a node uses: the contract-only sink
// (every node a client of one ledger) and the reference BlobSink.
var sinks = []struct {
	name string
	make func(bucket blobstore.Blobstore) (perNode func() job.Sink, output func(*testing.T) []job.Record)
}{
	{"contract", func(blobstore.Blobstore) (func() job.Sink, func(*testing.T) []job.Record) {
		l := newLedger()
		return func() job.Sink { return l.sink() }, func(*testing.T) []job.Record { return l.output() }
	}},
	{"blob", func(bucket blobstore.Blobstore) (func() job.Sink, func(*testing.T) []job.Record) {
		return func() job.Sink { return job.NewBlobSink(bucket, "out/") },
			func(t *testing.T) []job.Record { return jobtest.BlobOutput(t, job.NewBlobSink(bucket, "out/")) }
	}},
}

// crashAt returns a hook that answers action at the nth occurrence of
// step (n from 1), and continues otherwise.
func crashAt(step checkpoint.Step, n int32, action checkpoint.HookAction) func(checkpoint.Step, string) checkpoint.HookAction {
	var seen atomic.Int32
	return func(s checkpoint.Step, _ string) checkpoint.HookAction {
		if s == step && seen.Add(1) == n {
			return action
		}
		return checkpoint.HookContinue
	}
}

// A crash (HookHalt) or a failure (HookFail) after every protocol step,
// then a restart on the same disk or on an empty one: the output and
// the state hold every record exactly once, with either sink.
func TestCrashAtEveryStepExactlyOnce(t *testing.T) {
	const n = 300
	for _, sk := range sinks {
		for _, step := range checkpoint.Steps {
			for _, action := range []checkpoint.HookAction{checkpoint.HookHalt, checkpoint.HookFail} {
				for _, sameDisk := range []bool{false, true} {
					if sameDisk && action == checkpoint.HookFail {
						continue // a failure leaves the disk as a crash does
					}
					name := fmt.Sprintf("%s/%s/%s/same-disk=%v", sk.name, step, action, sameDisk)
					t.Run(name, func(t *testing.T) {
						bucket := memstore.New()
						sink, output := sk.make(bucket)
						disk := t.TempDir()
						cfg := func(d string) job.Config {
							return job.Config{
								Storage: node(t, bucket, d), Dir: d, Source: &source{n: n, batch: 10},
								Processor: summer{}, Sink: sink(), EveryRecords: 50, State: smallState,
							}
						}
						_, err := job.Run(t.Context(), job.WithHook(cfg(disk), crashAt(step, 3, action)))
						switch {
						case action == checkpoint.HookHalt && !errors.Is(err, job.ErrHalted):
							t.Fatalf("node 1: %v, want the halt", err)
						case action == checkpoint.HookFail && !errors.Is(err, checkpoint.ErrInjected):
							t.Fatalf("node 1: %v, want the injected failure", err)
						}
						if !sameDisk {
							disk = t.TempDir()
						}
						c2 := cfg(disk)
						res, err := job.Run(t.Context(), c2)
						if err != nil {
							t.Fatalf("node 2: %v", err)
						}
						if res.Restored == "" {
							t.Errorf("node 2 restored nothing (%v)", res.Action)
						}
						checkExactlyOnce(t, output(t), n)
						if sk.name == "blob" {
							checkSwept(t, bucket)
						}
					})
				}
			}
		}
	}
}

// checkSwept checks that the BlobSink on bucket holds no transaction
// object but the committed ones: the dead writers' leftovers are gone.
func checkSwept(t *testing.T, bucket blobstore.Blobstore) {
	t.Helper()
	count := func(prefix string) int {
		n := 0
		for _, err := range bucket.List(t.Context(), prefix) {
			if err != nil {
				t.Fatal(err)
			}
			n++
		}
		return n
	}
	if txns, commits := count("out/txn/"), count("out/commit/"); txns != commits {
		t.Errorf("sink holds %d transaction objects for %d commits: leftovers not swept", txns, commits)
	}
}

// A leftover live directory and a leftover state directory of the next
// checkpoint id on the same disk neither leak into the state nor block.
func TestSameDiskLeftoversNeitherLeakNorBlock(t *testing.T) {
	const n = 200
	bucket := memstore.New()
	sink := job.NewBlobSink(bucket, "out/")
	disk := t.TempDir()
	cfg := job.Config{
		Storage: node(t, bucket, disk), Dir: disk, Source: &source{n: n, batch: 10},
		Processor: summer{}, Sink: sink, EveryRecords: 50, State: smallState,
	}
	// Halt right after the second record is persisted: the live state
	// then holds records past it, and the loop may have cut the next one.
	if _, err := job.Run(t.Context(), job.WithHook(cfg, crashAt(checkpoint.StepPersistPrepared, 2, checkpoint.HookHalt))); !errors.Is(err, job.ErrHalted) {
		t.Fatalf("node 1: %v", err)
	}
	st := node(t, bucket, disk)
	latest, err := st.Load(t.Context())
	if err != nil || latest == nil {
		t.Fatalf("load: %v %v", latest, err)
	}
	next, _ := checkpoint.NextID(latest.ID)
	// Plant the trap: a state directory of the next id.
	if err := os.MkdirAll(filepath.Join(st.StateDir(next), "sum"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg.Storage = st
	if _, err := job.Run(t.Context(), cfg); err != nil {
		t.Fatalf("node 1 again, same disk: %v", err)
	}
	checkExactlyOnce(t, jobtest.BlobOutput(t, sink), n)
}

// A node killed before its first checkpoint restarts on the same disk
// from nothing: the live state its first run wrote is not reopened.
func TestSameDiskRestartBeforeFirstCheckpoint(t *testing.T) {
	const n = 100
	bucket := memstore.New()
	sink := job.NewBlobSink(bucket, "out/")
	disk := t.TempDir()
	cfg := job.Config{
		Storage: node(t, bucket, disk), Dir: disk, Source: &source{n: n, batch: 10},
		Processor: summer{}, Sink: sink, EveryRecords: 1000, State: smallState,
	}
	ctx, kill := context.WithCancel(t.Context())
	c := cfg
	c.Observe = func(e job.Event) {
		if e.Records >= 30 {
			kill()
		}
	}
	if res, err := job.Run(ctx, c); !errors.Is(err, context.Canceled) || res.Checkpoints != 0 {
		t.Fatalf("node 1: %+v %v, want killed before any checkpoint", res, err)
	}
	if _, err := os.Stat(filepath.Join(disk, "live", "sum")); err != nil {
		t.Fatalf("node 1 left no live state to trip on: %v", err)
	}
	cfg.Storage = node(t, bucket, disk)
	if _, err := job.Run(t.Context(), cfg); err != nil {
		t.Fatalf("restart: %v", err)
	}
	checkExactlyOnce(t, jobtest.BlobOutput(t, sink), n)
}
