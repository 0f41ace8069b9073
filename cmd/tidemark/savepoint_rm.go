package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/tidemark-io/tidemark/checkpoint"
)

func (a *app) savepointRmCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "rm LABEL",
		Short: "Remove savepoint LABEL",
		Long: `rm deletes savepoints/LABEL. A label that does not exist is an error (exit 1).

rm takes no writer role: it is safe beside a job running on the store. It refuses a
prefix that is not a Tidemark store (see tidemark gc --help) and deletes nothing there.`,
		Example: `  tidemark savepoint rm before-upgrade`,
		Args:    labelArgs("LABEL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			label := args[0]
			bs, s, err := a.openReader(ctx) // a missing directory is an error, not "no savepoint"
			if err != nil {
				return err
			}
			// A user's savepoints/ folder is not ours: refuse before deleting.
			if err := s.CheckStore(ctx); err != nil {
				u, _ := a.storeURL()
				return fmt.Errorf("savepoint rm: %s: %w", redactURL(u), err)
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
