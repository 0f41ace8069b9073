package integration

import (
	"os"
	"testing"

	"github.com/tidemark-io/tidemark/integration/miniotest"
)

func TestMain(m *testing.M) {
	if os.Getenv(instantChildEnv) != "" {
		// A re-executed benchmark child (instant_child_test.go), not a
		// test run.
		os.Exit(instantChild())
	}
	if os.Getenv(replicateChildEnv) != "" {
		// A replicator process the drills kill (replication_test.go).
		os.Exit(replicateChild())
	}
	os.Exit(miniotest.Main(m))
}
