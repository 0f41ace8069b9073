package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/tidemark-io/tidemark/internal/version"
)

// versionCmd is `tidemark version` (also `tidemark --version`).
func (a *app) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, VCS revision and Go version of this build",
		Args:  noArgs,
		RunE: func(*cobra.Command, []string) error {
			info := version.Info()
			a.emit(info, func(w io.Writer) { fmt.Fprintf(w, "tidemark %s\n", info) })
			return nil
		},
	}
}
