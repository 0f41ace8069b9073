package sim_test

import (
	"testing"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
	"github.com/tidemark-io/tidemark/integration/sim"
)

// The simulated store keeps the Blobstore contract when no fault is
// injected: the simulation tests Tidemark, not a store of its own rules.
func TestConformance(t *testing.T) {
	blobstoretest.Run(t, func(*testing.T) blobstore.Blobstore { return sim.NewStore(nil) }, blobstoretest.Options{})
}
