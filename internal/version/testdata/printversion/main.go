// Command printversion prints version.Info as JSON; the version test
// builds it to see what the go command stamps into a real binary.
package main

import (
	"encoding/json"
	"os"

	"github.com/tidemark-io/tidemark/internal/version"
)

func main() {
	if err := json.NewEncoder(os.Stdout).Encode(version.Info()); err != nil {
		os.Exit(1)
	}
}
