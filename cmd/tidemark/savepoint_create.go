package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/tidemark-io/tidemark/checkpoint"
)

func (a *app) savepointCreateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "create LABEL",
		Short: "Archive the latest completed checkpoint as savepoint LABEL",
		Long: `create streams the latest completed checkpoint (record and every state file, read
from the store and checked against its digests) into savepoints/LABEL, replacing a
savepoint of that label. It needs no writer role: a running job is not disturbed.`,
		Example: `  tidemark savepoint create before-upgrade --store file://$PWD/.tidemark/store`,
		Args:    labelArgs("LABEL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			label := args[0]
			bs, s, err := a.openReader(ctx)
			if err != nil {
				return err
			}
			total := int64(0)
			if cp, err := s.LoadLatestCompleted(ctx); err == nil && cp != nil {
				total = describe(ctx, s, cp.ID, time.Now()).Size
			}
			// Progress counts the state read from the store into the archive.
			p := a.newProgress("savepoint "+label, total)
			src := readStorage(p.observed(bs))
			id, err := checkpoint.CreateSavepoint(ctx, src, bs, label)
			p.done()
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
}
