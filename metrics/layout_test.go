package metrics_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore/memstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/metrics"
)

// checkpointKeyClasses are the classes blobstorage.KeyClass returns
// (besides "other").
var checkpointKeyClasses = []string{"record", "part", "private", "shared", "remote", "pointer", "writer", "mark", "pin", "savepoint", "replication"}

// With blobstorage.KeyClass as the classifier, a writer's saves, a fresh
// node's restore and GC touch only keys of the declared classes: no
// operation but a List is counted as "other", and each class a save
// writes has its puts.
func TestCheckpointLayoutKeyClasses(t *testing.T) {
	ctx := t.Context()
	reg := prometheus.NewPedanticRegistry()
	bm, err := metrics.NewBlobstoreMetrics(reg, metrics.BlobstoreOptions{KeyClass: blobstorage.KeyClass, KeyClasses: checkpointKeyClasses})
	if err != nil {
		t.Fatal(err)
	}
	bucket := bm.Wrap(memstore.New())
	dir := t.TempDir()

	nodeA := blobstorage.New(bucket, filepath.Join(dir, "a"), blobstorage.Options{Keep: 1})
	if _, err := nodeA.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= 3; seq++ {
		id := checkpoint.NewID(seq)
		owner := filepath.Join(nodeA.StateDir(id), "counts")
		if err := os.MkdirAll(owner, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, data := range map[string]string{fmt.Sprintf("%06d.sst", seq): "k=v", "MANIFEST-000001": "manifest"} {
			if err := os.WriteFile(filepath.Join(owner, name), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := nodeA.Save(ctx, &checkpoint.CheckpointData{
			ID:        id,
			Source:    map[string][]byte{checkpoint.SourceOffsetsKey: []byte("offset=1")},
			StateDirs: map[string]string{"counts": "counts"},
			Status:    checkpoint.StatusCompleted,
		}); err != nil {
			t.Fatal(err)
		}
	}
	nodeB := blobstorage.New(bucket, filepath.Join(dir, "b"), blobstorage.Options{})
	latest, err := nodeB.LoadLatestCompleted(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.Materialize(ctx, nodeB, latest); err != nil {
		t.Fatal(err)
	}
	if _, err := nodeA.GC(ctx, blobstorage.GCOptions{}); err != nil {
		t.Fatal(err)
	}

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	puts := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			v := m.GetCounter().GetValue() + float64(m.GetHistogram().GetSampleCount())
			if labels["key_class"] == metrics.OtherKeyClass && v != 0 {
				// A List is classified by its prefix, and
				// blobstorage.KeyClass("checkpoints/") is "other" today
				// (the listing of records by Load and GC).
				if labels["operation"] == "list" {
					t.Logf("%s%v = %v: a listing whose prefix has no class", mf.GetName(), labels, v)
					continue
				}
				t.Errorf("%s%v = %v: an operation on a key outside the declared classes", mf.GetName(), labels, v)
			}
			if mf.GetName() == "tidemark_objstore_operations_total" && strings.HasPrefix(labels["operation"], "put") {
				puts[labels["key_class"]] += v
			}
		}
	}
	for _, class := range []string{"record", "private", "shared", "pointer", "writer", "mark"} {
		if puts[class] == 0 {
			t.Errorf("no put counted for key class %q; puts by class: %v", class, puts)
		}
	}
	t.Logf("puts by key class: %v", puts)
}
