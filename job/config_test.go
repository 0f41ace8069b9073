package job_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore/memstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/job"
	"github.com/tidemark-io/tidemark/state"
)

// Start refuses a Config it cannot run, clearly and before touching any
// store or directory.
func TestStartRefusesBadConfig(t *testing.T) {
	bucket := memstore.New()
	dir := filepath.Join(t.TempDir(), "never-created")
	good := func() job.Config {
		return job.Config{
			Storage: blobstorage.New(bucket, filepath.Join(dir, "checkpoints"), blobstorage.Options{}), Dir: dir,
			Source: &source{n: 10}, Processor: summer{}, Sink: job.NewBlobSink(bucket, "out/"),
		}
	}
	cases := []struct {
		name   string
		change func(*job.Config)
		says   string
	}{
		{"no storage", func(c *job.Config) { c.Storage = nil }, "Storage"},
		{"no dir", func(c *job.Config) { c.Dir = "" }, "Dir"},
		{"no source nor sink", func(c *job.Config) { c.Source, c.Sink = nil, nil }, "[Sink Source] required"},
		{"no processor", func(c *job.Config) { c.Processor = nil }, "Processor"},
		{"negative interval", func(c *job.Config) { c.Interval = -1 }, "Interval"},
		{"bad remote state", func(c *job.Config) { c.RemoteState = "some" }, `RemoteState "some"`},
		{"remote on a file storage", func(c *job.Config) {
			c.RemoteState, c.Storage = "all", checkpoint.NewFileStorage(filepath.Join(dir, "ckpt"))
		}, "needs a *blobstorage.Storage"},
		{"state remote set by hand", func(c *job.Config) { c.State.Remote = state.RemoteOptions{Store: bucket} }, "RemoteState, not State.Remote"},
		{"bad owner", func(c *job.Config) { c.Owners = []string{"a/b"} }, `owner "a/b"`},
		{"storage dir is the live state", func(c *job.Config) {
			c.Storage = blobstorage.New(bucket, filepath.Join(dir, "live"), blobstorage.Options{})
		}, "inside Dir/live"},
		{"file storage inside the live state", func(c *job.Config) {
			c.Storage = checkpoint.NewFileStorage(filepath.Join(dir, "live", "ckpt"))
		}, "inside Dir/live"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := good()
			tc.change(&cfg)
			_, err := job.Run(t.Context(), cfg)
			if !errors.Is(err, job.ErrConfig) || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("Run: %v, want ErrConfig saying %q", err, tc.says)
			}
		})
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused Run created %s (%v)", dir, err)
	}
	for _, err := range bucket.List(t.Context(), "") {
		if err == nil {
			t.Fatal("a refused Run wrote to the bucket")
		}
	}
}

// A savepoint needs a Storage in a Blobstore: on a FileStorage Stop
// refuses it, and the job goes on.
func TestStopRefusesSavepointWithoutBlobstore(t *testing.T) {
	dir := t.TempDir()
	l := newLedger()
	j := startUntil(t, job.Config{
		Storage: checkpoint.NewFileStorage(filepath.Join(dir, "ckpt")), Dir: dir,
		Source: &source{n: 1 << 30, batch: 10}, Processor: summer{}, Sink: l.sink(), State: smallState,
	}, 10)
	if _, err := j.Stop(t.Context(), job.StopOptions{Savepoint: "x"}); !errors.Is(err, job.ErrConfig) {
		t.Errorf("stop: %v, want ErrConfig", err)
	}
	if _, err := j.Stop(t.Context(), job.StopOptions{}); err != nil {
		t.Errorf("stop: %v", err)
	}
}

// failing is a Source, Processor or Sink that fails where told.
type failing struct {
	source
	at string
}

var errBoom = errors.New("boom")

func (f *failing) Next(ctx context.Context) ([]job.Record, error) {
	if f.at == "next" && f.next >= 20 {
		return nil, errBoom
	}
	return f.source.Next(ctx)
}

func (f *failing) Offsets() ([]byte, error) {
	if f.at == "offsets" {
		return nil, errBoom
	}
	return f.source.Offsets()
}

// A failing Source, Processor or Sink stops the job with its error, and
// a failed Prepare aborts its transaction (no record can name it); a
// failed Commit aborts nothing, and recovery commits it.
func TestUserErrorsStopTheJob(t *testing.T) {
	for _, at := range []string{"next", "offsets", "process", "write", "prepare", "commit"} {
		t.Run(at, func(t *testing.T) {
			bucket := memstore.New()
			l := newLedger()
			sink := &failingSink{contractSink: l.sink(), at: at}
			var proc job.Processor = summer{}
			if at == "process" {
				proc = failingProc{}
			}
			d := t.TempDir()
			_, err := job.Run(t.Context(), job.Config{
				Storage: node(t, bucket, d), Dir: d, Source: &failing{source: source{n: 100, batch: 10}, at: at},
				Processor: proc, Sink: sink, EveryRecords: 10, State: smallState,
			})
			if !errors.Is(err, errBoom) {
				t.Fatalf("Run: %v, want boom", err)
			}
			if at == "prepare" && sink.aborted == 0 {
				t.Error("a failed Prepare did not abort its transaction")
			}
			if at == "commit" && sink.aborted != 0 {
				t.Error("a failed Commit aborted its transaction")
			}
			// And the job resumes exactly once.
			if _, err := job.Run(t.Context(), job.Config{
				Storage: node(t, bucket, d), Dir: d, Source: &source{n: 100, batch: 10},
				Processor: summer{}, Sink: l.sink(), EveryRecords: 10, State: smallState,
			}); err != nil {
				t.Fatal(err)
			}
			checkExactlyOnce(t, l.output(), 100)
		})
	}
}

type failingProc struct{}

func (failingProc) Process(context.Context, *state.Store, []job.Record) ([]job.Record, error) {
	return nil, errBoom
}

type failingSink struct {
	*contractSink
	at      string
	aborted int
}

func (s *failingSink) Write(ctx context.Context, txn job.Txn, recs []job.Record) error {
	if s.at == "write" {
		return errBoom
	}
	return s.contractSink.Write(ctx, txn, recs)
}

func (s *failingSink) Prepare(ctx context.Context, txn job.Txn) error {
	if s.at == "prepare" {
		return errBoom
	}
	return s.contractSink.Prepare(ctx, txn)
}

func (s *failingSink) Commit(ctx context.Context, txn job.Txn) error {
	if s.at == "commit" {
		return errBoom
	}
	return s.contractSink.Commit(ctx, txn)
}

func (s *failingSink) Abort(ctx context.Context, txn job.Txn) error {
	s.aborted++
	return s.contractSink.Abort(ctx, txn)
}
