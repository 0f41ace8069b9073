package main

import (
	"github.com/spf13/cobra"
)

func (a *app) savepointCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "savepoint",
		Short: "Create, restore, list, remove, copy, export and import savepoints",
		Long: `A savepoint is a named, self-contained, checksummed copy of a completed
checkpoint (record and every state file). The store keeps each file's content once,
by SHA-256, in its savepoint area (savepoint-data/), and per savepoint a manifest
under savepoints/<label>: a new savepoint uploads only the files the area lacks, a
copy to another store sends only what that store lacks, and removing one frees only
what no other savepoint uses. Garbage collection of checkpoints never touches them.
export writes one as a portable tar file; import stores such a file. Savepoints
stored as one archive (before the savepoint area) are read by every command.
See docs/savepoints.md.`,
		Example: `  tidemark savepoint create v1
  tidemark savepoint ls
  tidemark savepoint cp v1 file://$PWD/.tidemark/store 's3://dr-bucket/wordcount?region=eu-west-2'
  tidemark savepoint restore v1 --store 's3://dr-bucket/wordcount?region=eu-west-2'
  tidemark savepoint export v1 v1.tar
  tidemark savepoint rm v1`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(a.savepointCreateCmd(), a.savepointRestoreCmd(), a.savepointLsCmd(), a.savepointRmCmd(), a.savepointCpCmd(),
		a.savepointExportCmd(), a.savepointImportCmd())
	return cmd
}
