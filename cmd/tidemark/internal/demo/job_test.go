package demo

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/cmd/tidemark/internal/demofault"
	"github.com/tidemark-io/tidemark/filestore"
)

// node is one machine running the job: its own empty local directory and
// BlobStorage, sharing the store with every other node.
func node(t *testing.T, bs blobstore.Blobstore) Config {
	t.Helper()
	dir := t.TempDir()
	return Config{
		Storage:      blobstorage.New(bs, filepath.Join(dir, "checkpoints"), blobstorage.Options{Concurrency: 2}),
		Sink:         NewSink(bs),
		Dir:          dir,
		Records:      20_000,
		Words:        200,
		Batch:        500,
		Interval:     time.Hour, // checkpoints by count only: deterministic
		EveryRecords: 3000,
	}
}

func fileStore(t *testing.T) blobstore.Blobstore {
	t.Helper()
	bs, err := filestore.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return bs
}

func mustComplete(t *testing.T, cfg Config) Result {
	t.Helper()
	return mustRun(t.Context(), t, cfg)
}

// mustRun runs cfg with ctx (which may carry faults) to the end and checks
// it ended exactly-once.
func mustRun(ctx context.Context, t *testing.T, cfg Config) Result {
	t.Helper()
	res, err := Run(ctx, cfg)
	if err != nil {
		t.Fatalf("run: %v (result %+v)", err, res)
	}
	if !res.Check.OK() || res.Check.Records != cfg.Records {
		t.Fatalf("check: %s", res.Check)
	}
	return res
}

func TestRunToCompletionIsExactlyOnce(t *testing.T) {
	cfg := node(t, fileStore(t))
	res := mustComplete(t, cfg)
	if res.Action != checkpoint.ActionStartFresh || res.StartOffset != 0 || res.EndOffset != cfg.Records {
		t.Fatalf("result %+v: want a fresh start reading 0..%d", res, cfg.Records)
	}
	// 20000 records, a checkpoint every 3000: 6 periodic + the final one.
	if res.Checkpoints != 7 {
		t.Fatalf("%d checkpoints completed, want 7", res.Checkpoints)
	}
	latest, err := cfg.Storage.LoadLatestCompleted(t.Context())
	if err != nil || latest == nil || latest.ID != res.LastID {
		t.Fatalf("latest completed = %v, %v; want %s", latest, err, res.LastID)
	}
}

func TestRunAgainAfterCompletionOnlyChecks(t *testing.T) {
	bs := fileStore(t)
	first := mustComplete(t, node(t, bs))
	again := mustComplete(t, node(t, bs))
	if again.RestoredID != first.LastID || again.StartOffset != 20_000 || again.Checkpoints != 0 {
		t.Fatalf("second run %+v: want a restore of %s at the end, no new checkpoint", again, first.LastID)
	}
}

func TestRunResumesOnAnEmptyNodeAfterACrashExactlyOnce(t *testing.T) {
	bs := fileStore(t)
	crashing := node(t, bs)
	// Crash mid-way between checkpoints.
	res, err := Run(demofault.With(t.Context(), demofault.Faults{CrashAfter: 10_200}), crashing)
	if !errors.Is(err, ErrCrashed) {
		t.Fatalf("crashing run: %v, want ErrCrashed", err)
	}
	if res.EndOffset < 10_200 || res.EndOffset >= 20_000 {
		t.Fatalf("crashed at offset %d, want in [10200, 20000)", res.EndOffset)
	}
	// A new node with an empty disk resumes from the store.
	cfg := node(t, bs)
	resumed := mustComplete(t, cfg)
	if resumed.RestoredID == "" || resumed.StartOffset == 0 || resumed.StartOffset > 10_200 {
		t.Fatalf("resume %+v: want a restore from a checkpoint at or before the crash", resumed)
	}
	// The restored state directory was pruned with what Restore wrote
	// beside it: only the last checkpoint's directory is left.
	entries, err := os.ReadDir(filepath.Join(cfg.Dir, "checkpoints"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if len(names) != 1 || names[0] != resumed.LastID+".state" {
		t.Errorf("local checkpoint dirs after the resumed run %v, want only %s.state", names, resumed.LastID)
	}
}

func TestRunCancelledMidRunResumesExactlyOnce(t *testing.T) {
	bs := fileStore(t)
	cfg := node(t, bs)
	ctx, cancel := context.WithCancel(demofault.With(t.Context(), demofault.Faults{Slow: time.Millisecond}))
	cfg.Progress = func(p Progress) {
		if p.Event == "checkpoint" && p.Checkpoints == 2 {
			cancel()
		}
	}
	if _, err := Run(ctx, cfg); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled run: %v, want context.Canceled", err)
	}
	cancel()
	cfg.Progress = nil
	// Same node, same directory: the leftover live state is rebuilt from
	// the checkpoint, not trusted.
	res := mustComplete(t, cfg)
	if res.RestoredID == "" {
		t.Fatalf("resume %+v: want a restore", res)
	}
}

func TestRunWithFileStorageKeepsStateLocally(t *testing.T) {
	dir := t.TempDir()
	cfg := node(t, fileStore(t))
	cfg.Storage = checkpoint.NewFileStorage(filepath.Join(dir, "checkpoints"))
	if _, err := Run(demofault.With(t.Context(), demofault.Faults{CrashAfter: 7000}), cfg); !errors.Is(err, ErrCrashed) {
		t.Fatalf("crashing run: %v, want ErrCrashed", err)
	}
	mustComplete(t, cfg)
}

func TestRunRefusesAStoreOfAnotherJob(t *testing.T) {
	bs := fileStore(t)
	mustComplete(t, node(t, bs))
	writer := string(blobstoretest.Get(t, bs, "_writer"))
	other := node(t, bs)
	other.Records = 30_000
	if _, err := Run(t.Context(), other); !errors.Is(err, ErrJobMismatch) {
		t.Fatalf("run with other records: %v, want ErrJobMismatch", err)
	}
	// Refused before taking the writer role: the job there is not fenced.
	if got := string(blobstoretest.Get(t, bs, "_writer")); got != writer {
		t.Fatalf("the refused run changed _writer:\n%s\nwas\n%s", got, writer)
	}
}

func TestRunDetectsOutputProducedTwice(t *testing.T) {
	ctx := t.Context()
	bs := fileStore(t)
	cfg := node(t, bs)
	mustComplete(t, cfg)
	// Duplicate one committed transaction under a fresh id: exactly the
	// damage a sink without transactions does on replay.
	ids := committedIDs(t, bs, all)
	duplicateTransaction(t, bs, ids[len(ids)-1])
	res, err := Run(ctx, node(t, bs))
	if !errors.Is(err, ErrNotExactlyOnce) || res.Check.OK() || res.Check.OutputWrong == 0 {
		t.Fatalf("run over doubled output: %v, check %s; want ErrNotExactlyOnce", err, res.Check)
	}
}

func TestRunPrunesLocalStateOfOlderCheckpoints(t *testing.T) {
	cfg := node(t, fileStore(t))
	res := mustComplete(t, cfg)
	entries, err := os.ReadDir(filepath.Join(cfg.Dir, "checkpoints"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != res.LastID+".state" {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("local checkpoint dirs %v, want only %s.state", names, res.LastID)
	}
}

func TestRunClearsLeftoverLocalStateOfAnUnpersistedCheckpoint(t *testing.T) {
	cfg := node(t, fileStore(t))
	// A run that crashed after its state checkpoint but before staging
	// anything leaves StateDir of an id that will be used again.
	junk := filepath.Join(cfg.Storage.StateDir(checkpoint.NewID(1)), OwnerCounts, "000001.sst")
	if err := os.MkdirAll(filepath.Dir(junk), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(junk, []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustComplete(t, cfg)
}
