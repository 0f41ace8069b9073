package main

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/savepoint"
)

func (a *app) savepointCpCmd() *cobra.Command {
	var replace bool
	cmd := &cobra.Command{
		Use:   "cp LABEL SRC_URL DST_URL",
		Short: "Copy savepoint LABEL from one store to another, verifying it",
		Long: `cp copies savepoint LABEL from the store SRC_URL to the store DST_URL (another
bucket, region, or a directory) without a local copy. It sends only the files DST
does not hold already (a copy of an earlier savepoint leaves most of them there),
checks every file's size and SHA-256 on the way, and writes DST's manifest last, once
all of it is there. Interrupted, it resends nothing that arrived when run again. A
damaged savepoint is not copied (no savepoint appears in DST) and the exit code is 3.
A savepoint stored as one archive is stored in DST by content, as new ones are.

If DST holds a savepoint LABEL already, cp refuses and leaves it as it was (the
copy is written only if the label is free in DST); --replace replaces it.`,
		Example: `  tidemark savepoint cp v1 file://$PWD/.tidemark/store 's3://dr-bucket/wordcount?region=eu-west-2'
  tidemark savepoint cp v1 s3://prod/job s3://backup/job --output json
  tidemark savepoint cp nightly s3://prod/job s3://backup/job --replace`,
		Args: labelArgs("LABEL", "SRC_URL", "DST_URL"),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			ctx := cmd.Context()
			label, srcURL, dstURL := args[0], args[1], args[2]
			// A new destination directory that gets no savepoint is
			// removed again: a refused copy leaves nothing behind.
			created := dirsToCreate(dstURL)
			defer func() {
				if err != nil {
					created.undo()
				}
			}()
			// The source must exist (a missing directory is said so, not
			// "no savepoint"); the destination may be a new store.
			src, err := openStoreURL(ctx, srcURL, mustExist(srcURL))
			if err != nil {
				return err
			}
			dst, err := openStoreURL(ctx, dstURL, dstURL)
			if err != nil {
				return err
			}
			info, err := savepoint.Stat(ctx, src, label)
			if errors.Is(err, blobstore.ErrNotFound) {
				return fmt.Errorf("no savepoint %q in %s: %w", label, srcURL, err)
			}
			if err != nil {
				return verifyFailed(err)
			}
			if !replace {
				if err := refuseExisting(ctx, dst, label, dstURL); err != nil {
					return err
				}
			}
			start := time.Now()
			p := a.newProgress("copy "+label, info.Bytes)
			st, err := savepoint.Copy(ctx, p.observed(src), dst, label, savepoint.Options{Replace: replace})
			p.done()
			if errors.Is(err, savepoint.ErrExists) {
				return existsError(ctx, dst, label, dstURL, fmt.Errorf("%w: %w", checkpoint.ErrSavepointExists, err)) // created meanwhile
			}
			if err != nil {
				return verifyFailed(err)
			}
			secs := time.Since(start).Seconds()
			a.emit(map[string]any{"label": label, "from": srcURL, "to": dstURL, "size": st.Bytes, "files": st.Files,
				"sent_files": st.Uploaded, "sent_bytes": st.UploadedBytes, "verified": true, "seconds": secs},
				func(w io.Writer) {
					fmt.Fprintf(w, "savepoint %s copied and verified: %s from %s to %s in %.1fs: %s\n",
						label, humanBytes(st.Bytes), srcURL, dstURL, secs, sentSummary("sent", st))
				})
			return nil
		},
	}
	cmd.Flags().BoolVar(&replace, "replace", false, "replace a savepoint of that label in DST_URL")
	return cmd
}
