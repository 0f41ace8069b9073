package main

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/savepoint"
)

func (a *app) savepointCreateCmd() *cobra.Command {
	var replace bool
	cmd := &cobra.Command{
		Use:   "create LABEL",
		Short: "Archive the latest completed checkpoint as savepoint LABEL",
		Long: `create stores the latest completed checkpoint (record and every state file) as
savepoint LABEL. Only the files the store's savepoint area lacks are read and
uploaded, each checked against its digest; the savepoint's manifest is written last.
It needs no writer role: a running job is not disturbed.

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
			id, st, err := checkpoint.CreateSavepointWith(ctx, src, bs, label, savepoint.Options{Replace: replace})
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
			a.emit(map[string]any{"label": label, "checkpoint": id, "size": st.Bytes, "files": st.Files,
				"uploaded_files": st.Uploaded, "uploaded_bytes": st.UploadedBytes, "key": checkpoint.SavepointKey(label)},
				func(w io.Writer) {
					fmt.Fprintf(w, "savepoint %s created from checkpoint %s (%s in %s): %s\n",
						label, id, humanBytes(st.Bytes), plural(st.Files, "file"), sentSummary("uploaded", st))
				})
			return nil
		},
	}
	cmd.Flags().BoolVar(&replace, "replace", false, "replace a savepoint of that label")
	return cmd
}
