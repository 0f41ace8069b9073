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
	if os.Getenv(copyChildEnv) != "" {
		// A savepoint copy the test kills mid-way
		// (savepoint_area_test.go).
		os.Exit(copyChild())
	}
	os.Exit(miniotest.Main(m))
}
