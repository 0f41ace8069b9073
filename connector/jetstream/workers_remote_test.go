package jetstream_test

import (
	"strings"
	"testing"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/integration/natstest"
)

// TestWorkersRescaleRemoteState: TestWorkersRescale's job with its state
// in remote mode, over a real NATS Group. Two workers crash with their
// coordinator after two checkpoints whose tables are in the store; the
// job resumes with three, each opening the owners it declares in place.
// The output stream holds each input's effect once.
func TestWorkersRescaleRemoteState(t *testing.T) {
	srv := natstest.StartEmbedded(t)
	const parts, n = 4, 4000
	js := srv.JetStream(t)
	jobStreams(t, js, parts, n, 1)
	j := &workerJob{t: t, srv: srv, bucketDir: t.TempDir(), parts: parts, slots: []string{"w0", "w1"}, remote: "all"}
	j.crashAfterTwoCheckpoints()
	tables := 0
	for info, err := range j.bucket().List(t.Context(), blobstorage.RemotePrefix+"/") {
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(info.Key, ".sst") {
			tables++
		}
	}
	if tables == 0 {
		t.Fatal("the first run left no table in the store: nothing to open in place")
	}

	j.resumeOnThree(js, n)
}
