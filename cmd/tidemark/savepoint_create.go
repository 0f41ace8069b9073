package main

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/tidemark-io/tidemark/checkpoint"
)

func (a *app) savepointCreateCmd() *cobra.Command {
	var replace bool
	cmd := &cobra.Command{
		Use:   "create LABEL",
		Short: "Archive the latest completed checkpoint as savepoint LABEL",
		Long: `create streams the latest completed checkpoint (record and every state file, read
from the store and checked against its digests) into savepoints/LABEL. It needs no
writer role: a running job is not disturbed.

A label that is taken is refused, and the store is left as it was (the savepoint
is written only if the label is free, even with a concurrent create); --replace
replaces the savepoint of that label instead. A new label is 1-200 characters of
A-Z, a-z, 0-9, '.', '_' and '-', not starting with '.' or '-'.`,
		Example: `  tidemark savepoint create before-upgrade --store file://$PWD/.tidemark/store
  tidemark savepoint create nightly --replace`,
		Args: newLabelArgs("LABEL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			label := args[0]
			bs, s, err := a.openReader(ctx)
			if err != nil {
				return err
			}
			if !replace {
				if err := refuseExisting(ctx, bs, label, "the store"); err != nil {
					return err
				}
			}
			total := int64(0)
			if cp, err := s.LoadLatestCompleted(ctx); err == nil && cp != nil {
				ci, _ := describe(ctx, s, cp.ID, time.Now())
				total = ci.Size
			}
			// Progress counts the state read from the store into the archive.
			p := a.newProgress("savepoint "+label, total)
			src := readStorage(p.observed(bs))
			create := checkpoint.CreateNewSavepoint
			if replace {
				create = checkpoint.CreateSavepoint
			}
			id, err := create(ctx, src, bs, label)
			p.done()
			if errors.Is(err, checkpoint.ErrSavepointExists) {
				return existsError(ctx, bs, label, "the store", err) // created meanwhile
			}
			if errors.Is(err, checkpoint.ErrNoCompleted) {
				return fmt.Errorf("no completed checkpoint in the store to make savepoint %q of (tidemark ls lists its checkpoints)", label)
			}
			if err != nil {
				return err
			}
			info, err := bs.Stat(ctx, checkpoint.SavepointKey(label))
			if err != nil {
				return err
			}
			a.emit(map[string]any{"label": label, "checkpoint": id, "size": info.Size, "key": checkpoint.SavepointKey(label)},
				func(w io.Writer) {
					fmt.Fprintf(w, "savepoint %s created from checkpoint %s (%s)\n", label, id, humanBytes(info.Size))
				})
			return nil
		},
	}
	cmd.Flags().BoolVar(&replace, "replace", false, "replace a savepoint of that label")
	return cmd
}
