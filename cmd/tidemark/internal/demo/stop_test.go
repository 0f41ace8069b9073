package demo

import (
	"sync"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/cmd/tidemark/internal/demofault"
)

// stopAt returns a Stop channel and a Progress that closes it once n
// checkpoints completed.
func stopAt(n int) (<-chan struct{}, func(Progress)) {
	stop := make(chan struct{})
	var once sync.Once
	return stop, func(p Progress) {
		if p.Event == "checkpoint" && p.Checkpoints == n {
			once.Do(func() { close(stop) })
		}
	}
}

// checkStopped checks that res is a drained stop whose final checkpoint,
// the latest completed, is where the run stopped.
func checkStopped(t *testing.T, cfg Config, res Result, err error) {
	t.Helper()
	if err != nil || !res.Stopped {
		t.Fatalf("stopped run: %v, %+v: want a stop", err, res)
	}
	if res.EndOffset == 0 || res.EndOffset >= cfg.Records {
		t.Fatalf("stopped at record %d of %d: want in between", res.EndOffset, cfg.Records)
	}
	cp, err := cfg.Storage.LoadLatestCompleted(t.Context())
	if err != nil || cp == nil || cp.ID != res.LastID {
		t.Fatalf("latest completed %v (%v), want the final checkpoint %s", cp, err, res.LastID)
	}
	if off, err := DecodeOffsets(cp.Offsets()); err != nil || off.Next != res.EndOffset {
		t.Fatalf("final checkpoint at %d (%v), want where the run stopped, %d", off.Next, err, res.EndOffset)
	}
}

// A stopped run drains: its final checkpoint covers every record it read,
// so a fresh node resumes exactly there and the job ends exactly-once.
func TestRunStoppedResumesOnAnEmptyNodeAtItsFinalCheckpoint(t *testing.T) {
	bs := fileStore(t)
	cfg := node(t, bs)
	cfg.Stop, cfg.Progress = stopAt(2)
	res, err := Run(demofault.With(t.Context(), demofault.Faults{Slow: time.Millisecond}), cfg)
	checkStopped(t, cfg, res, err)

	again := mustComplete(t, node(t, bs))
	if again.RestoredID != res.LastID || again.StartOffset != res.EndOffset {
		t.Fatalf("resumed from %s at %d, want %s at %d", again.RestoredID, again.StartOffset, res.LastID, res.EndOffset)
	}
}

// The same for a job with workers: the coordinator drains, every worker
// saves its part of the final checkpoint, and they stop.
func TestRunWorkersStoppedResumesOnAnEmptyNodeAtItsFinalCheckpoint(t *testing.T) {
	bs := fileStore(t)
	wc, _ := workersNode(t, bs, 2)
	wc.Stop, wc.Progress = stopAt(2)
	res, err := RunWorkers(slowly(t.Context(), demofault.Faults{}), wc)
	if err != nil || !res.Stopped || res.EndOffset == 0 || res.EndOffset >= wc.Records {
		t.Fatalf("stopped run: %v, %+v: want a stop mid-way", err, res)
	}
	if cp, err := wc.Storage.LoadLatestCompleted(t.Context()); err != nil || cp == nil || cp.ID != res.LastID {
		t.Fatalf("latest completed %v (%v), want the final checkpoint %s", cp, err, res.LastID)
	}

	next, _ := workersNode(t, bs, 2)
	again := mustRunWorkers(t, t.Context(), next)
	if again.RestoredID != res.LastID || again.StartOffset != res.EndOffset {
		t.Fatalf("resumed from %s at %d, want %s at %d", again.RestoredID, again.StartOffset, res.LastID, res.EndOffset)
	}
}

// A stop before any checkpoint still leaves one to resume from.
func TestRunStoppedAtOnceLeavesACheckpoint(t *testing.T) {
	bs := fileStore(t)
	cfg := node(t, bs)
	stop := make(chan struct{})
	close(stop)
	cfg.Stop = stop
	res, err := Run(t.Context(), cfg)
	if err != nil || !res.Stopped || res.LastID == "" {
		t.Fatalf("stopped at once: %v, %+v: want a stop with a checkpoint", err, res)
	}
}
