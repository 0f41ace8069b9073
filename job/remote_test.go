package job_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tidemark-io/tidemark/blobstore/memstore"
	"github.com/tidemark-io/tidemark/job"
	"github.com/tidemark-io/tidemark/job/jobtest"
)

// State in remote mode round-trips: a node dies mid-stream, the next one
// resumes on an empty disk reading the tables where they are, exactly
// once; a local-mode run of that job is refused before it takes the
// writer role.
func TestRemoteStateRoundTrip(t *testing.T) {
	for _, mode := range []string{"all", "lower"} {
		t.Run(mode, func(t *testing.T) {
			const n = 600
			bucket := memstore.New()
			sink := job.NewBlobSink(bucket, "out/")
			cfg := func(disk string) job.Config {
				return job.Config{
					Storage: node(t, bucket, disk), Dir: disk, Source: &source{n: n, batch: 10},
					Processor: summer{}, Sink: sink, EveryRecords: 100, State: smallState, RemoteState: mode,
				}
			}
			ctx, kill := context.WithCancel(t.Context())
			c := cfg(t.TempDir())
			completed := 0
			c.Observe = func(e job.Event) {
				if e.Kind == job.EventCheckpoint {
					if completed++; completed == 2 {
						kill()
					}
				}
			}
			if _, err := job.Run(ctx, c); !errors.Is(err, context.Canceled) {
				t.Fatalf("node 1: %v", err)
			}
			remote := 0
			for info, err := range bucket.List(t.Context(), "remote/") {
				if err != nil {
					t.Fatal(err)
				}
				if strings.HasPrefix(info.Key, "remote/sum/") {
					remote++
				}
			}
			if mode == "all" && remote == 0 { // "lower" may hold all in L0 yet
				t.Fatal("node 1 wrote no remote table")
			}

			local := cfg(t.TempDir())
			local.RemoteState = ""
			writer := snapshot(t, bucket)["_writer"]
			if _, err := job.Run(t.Context(), local); !errors.Is(err, job.ErrConfig) {
				t.Fatalf("local-mode run of a remote job: %v, want ErrConfig", err)
			}
			if snapshot(t, bucket)["_writer"] != writer {
				t.Error("the refused run took the writer role")
			}

			res, err := job.Run(t.Context(), cfg(t.TempDir()))
			if err != nil {
				t.Fatalf("node 2: %v", err)
			}
			if res.Restored == "" {
				t.Error("node 2 restored nothing")
			}
			checkExactlyOnce(t, jobtest.BlobOutput(t, sink), n)
		})
	}
}
