package job_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/tidemark-io/tidemark/blobstore/memstore"
	"github.com/tidemark-io/tidemark/job"
	"github.com/tidemark-io/tidemark/job/jobtest"
)

// rawOffsets is a source whose offsets are not JSON.
type rawOffsets struct{ *source }

func (s rawOffsets) Offsets() ([]byte, error) { return []byte("n" + strconv.Itoa(s.next)), nil }

// Offsets that are not JSON fail the first checkpoint with a clear
// error: no record holds them and nothing is committed.
func TestNonJSONOffsetsRefusedAtBarrier(t *testing.T) {
	bucket := memstore.New()
	sink := job.NewBlobSink(bucket, "out/")
	d := t.TempDir()
	st := node(t, bucket, d)
	_, err := job.Run(t.Context(), job.Config{
		Storage: st, Dir: d, Source: rawOffsets{&source{n: 100, batch: 10}},
		Processor: summer{}, Sink: sink, EveryRecords: 20, State: smallState,
	})
	if err == nil || !strings.Contains(err.Error(), "not JSON") {
		t.Fatalf("run: %v, want the offsets refused as not JSON", err)
	}
	if cp, err := st.Load(context.Background()); err != nil || cp != nil {
		t.Errorf("a record was persisted: %v %v", cp, err)
	}
	if out := jobtest.BlobOutput(t, sink); len(out) != 0 {
		t.Errorf("%d records committed", len(out))
	}
}
