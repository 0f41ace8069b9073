package metrics_test

import (
	"context"
	"fmt"
	"log"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/memstore"
	"github.com/tidemark-io/tidemark/metrics"
)

// Count what a store does, by operation and by a class of key that the
// caller defines (here: pointers and the rest).
func ExampleNewBlobstoreMetrics() {
	reg := prometheus.NewRegistry()
	bm, err := metrics.NewBlobstoreMetrics(reg, metrics.BlobstoreOptions{
		KeyClass: func(key string) string {
			if strings.HasPrefix(key, "_") {
				return "pointer"
			}
			return "data"
		},
		KeyClasses: []string{"pointer", "data"},
	})
	if err != nil {
		log.Fatal(err)
	}
	bs := bm.Wrap(memstore.New())

	ctx := context.Background()
	_ = bs.Put(ctx, "shared/a.sst", strings.NewReader("0123456789"))
	_, _ = bs.PutIfAbsent(ctx, "_writer", strings.NewReader("1"))
	_, err = bs.Get(ctx, "missing") // an expected answer, not a failure
	fmt.Println("missing:", blobstore.IsExpected(err))

	mfs, err := reg.Gather()
	if err != nil {
		log.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "tidemark_objstore_operation_transferred_bytes_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if v := m.GetCounter().GetValue(); v > 0 {
				l := m.GetLabel() // sorted by name: key_class, operation
				fmt.Printf("%s %s: %v bytes\n", l[1].GetValue(), l[0].GetValue(), v)
			}
		}
	}
	// Output:
	// missing: true
	// put data: 10 bytes
	// put_if_absent pointer: 1 bytes
}
