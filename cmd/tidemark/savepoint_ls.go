package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

func (a *app) savepointLsCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Short:   "List savepoints with size and age",
		Example: `  tidemark savepoint ls --output json`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			bs, _, err := a.openReader(ctx)
			if err != nil {
				return err
			}
			sps, err := listSavepoints(ctx, bs, time.Now())
			if err != nil {
				return err
			}
			a.emit(sps, func(w io.Writer) {
				if len(sps) == 0 {
					fmt.Fprintln(w, "no savepoints")
					return
				}
				// A KEY ID column only where a savepoint is encrypted.
				keys := false
				for _, sp := range sps {
					keys = keys || sp.EncryptionKeyID != ""
				}
				tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
				if keys {
					fmt.Fprintln(tw, "SAVEPOINT\tSIZE\tAGE\tMODIFIED\tKEY ID")
				} else {
					fmt.Fprintln(tw, "SAVEPOINT\tSIZE\tAGE\tMODIFIED")
				}
				for _, sp := range sps {
					if keys {
						id := sp.EncryptionKeyID
						if id == "" {
							id = "-"
						}
						fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", sp.Label, humanBytes(sp.Size), sp.Age, sp.Modified.Format(time.RFC3339), id)
						continue
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", sp.Label, humanBytes(sp.Size), sp.Age, sp.Modified.Format(time.RFC3339))
				}
				tw.Flush()
			})
			return nil
		},
	}
}
