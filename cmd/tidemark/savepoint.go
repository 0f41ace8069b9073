package main

import (
	"github.com/spf13/cobra"
)

func (a *app) savepointCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "savepoint",
		Short: "Create, restore, list, remove and copy savepoints",
		Long: `A savepoint is a named, self-contained, checksummed archive of a completed
checkpoint (record and every state file), stored under savepoints/<label> in the
store. Garbage collection never touches it; it can be copied to another store
(another bucket, region, or a directory) and restored there.`,
		Example: `  tidemark savepoint create v1
  tidemark savepoint ls
  tidemark savepoint cp v1 file://$PWD/.tidemark/store 's3://dr-bucket/wordcount?region=eu-west-2'
  tidemark savepoint restore v1 --store 's3://dr-bucket/wordcount?region=eu-west-2'
  tidemark savepoint rm v1`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(a.savepointCreateCmd(), a.savepointRestoreCmd(), a.savepointLsCmd(), a.savepointRmCmd(), a.savepointCpCmd())
	return cmd
}
