package integration

import (
	"os"
	"testing"

	"github.com/tidemark-io/tidemark/integration/miniotest"
)

func TestMain(m *testing.M) { os.Exit(miniotest.Main(m)) }
