package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
)

func (a *app) savepointRestoreCmd() *cobra.Command {
	var from string
	cmd := &cobra.Command{
		Use:   "restore LABEL",
		Short: "Make savepoint LABEL the latest completed checkpoint of the store",
		Long: `restore extracts savepoint LABEL (from the store, or from --from URL), verifying
every digest, and saves it as the latest completed checkpoint of the store, so the
job resumes from it on its next start. It takes the writer role, which fences a job
running on the store. The store must not hold a checkpoint as new as the savepoint's
(restore into a fresh store or prefix, for example after 'savepoint cp').`,
		Example: `  tidemark savepoint restore v1 --store s3://dr-bucket/wordcount
  tidemark savepoint restore v1 --from s3://backup/wordcount --store file:///srv/job
  tidemark demo --store s3://dr-bucket/wordcount    # resumes from the savepoint`,
		Args: labelArgs("LABEL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			label := args[0]
			bs, storeURL, err := a.openStore(ctx)
			if err != nil {
				return err
			}
			src := bs
			if from != "" {
				if src, err = blobstore.Open(ctx, from); err != nil {
					return err
				}
			}
			size := int64(0)
			if info, err := src.Stat(ctx, checkpoint.SavepointKey(label)); err == nil {
				size = info.Size
			}
			dst, cleanup, err := writeStorage(ctx, bs, blobstorage.Options{})
			if err != nil {
				return err
			}
			defer cleanup()
			p := a.newProgress("restore "+label, size)
			id, err := checkpoint.RestoreSavepoint(ctx, dst, p.observed(src), label)
			p.done()
			if err != nil {
				return err
			}
			a.emit(map[string]any{"label": label, "checkpoint": id, "store": storeURL}, func(w io.Writer) {
				fmt.Fprintf(w, "savepoint %s restored as checkpoint %s, now the latest completed checkpoint of %s\n", label, id, storeURL)
			})
			return nil
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "read the savepoint from this store URL instead of --store")
	return cmd
}
