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
	os.Exit(miniotest.Main(m))
}
