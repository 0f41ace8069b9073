package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/tidemark-io/tidemark/checkpoint"
)

func (a *app) savepointRmCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "rm LABEL",
		Short:   "Remove savepoint LABEL",
		Long:    `rm deletes savepoints/LABEL. A label that does not exist is an error (exit 1).`,
		Example: `  tidemark savepoint rm before-upgrade`,
		Args:    labelArgs("LABEL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			label := args[0]
			bs, _, err := a.openReader(ctx) // a missing directory is an error, not "no savepoint"
			if err != nil {
				return err
			}
			ok, err := bs.Exists(ctx, checkpoint.SavepointKey(label))
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("no savepoint %q: %w", label, checkpoint.ErrBlobNotFound)
			}
			if err := checkpoint.DeleteSavepoint(ctx, bs, label); err != nil {
				return err
			}
			a.emit(map[string]any{"label": label, "removed": true}, func(w io.Writer) {
				fmt.Fprintf(w, "savepoint %s removed\n", label)
			})
			return nil
		},
	}
}
