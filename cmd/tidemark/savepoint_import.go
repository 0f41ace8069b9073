package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/savepoint"
)

func (a *app) savepointImportCmd() *cobra.Command {
	var replace bool
	cmd := &cobra.Command{
		Use:   "import FILE|- LABEL",
		Short: "Store a portable tar file (savepoint export) as savepoint LABEL",
		Long: `import reads a savepoint archive (as savepoint export writes it, plain or zstd)
from FILE, or standard input with -, checks every file's size and SHA-256 as it
streams, and stores it as savepoint LABEL, uploading only the files the store does
not hold already. The savepoint appears only once the whole archive has been read and
verified; a damaged archive stores no savepoint and exits with code 3.

A label that is taken is refused and nothing changes; --replace replaces it.`,
		Example: `  tidemark savepoint import v1.tar v1 --store s3://dr-bucket/wordcount
  tidemark savepoint export v1 - --store file://$PWD/a | tidemark savepoint import - v1 --store file://$PWD/b`,
		Args: func(cmd *cobra.Command, args []string) error {
			if err := exactArgs("FILE", "LABEL")(cmd, args); err != nil {
				return err
			}
			validate := checkpoint.ValidateNewLabel
			if replace {
				validate = checkpoint.ValidateLabel
			}
			if err := validate(args[1]); err != nil {
				return usageError{err}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			ctx := cmd.Context()
			file, label := args[0], args[1]
			var r io.Reader
			if file == "-" {
				if a.env.stdin == nil {
					return errNoStdin
				}
				r = a.env.stdin
			} else {
				f, err := os.Open(file)
				if err != nil {
					return err
				}
				defer f.Close()
				r = f
			}
			// A new store directory that gets no savepoint is removed again.
			if u, uerr := a.storeURL(); uerr == nil {
				created := dirsToCreate(u)
				defer func() {
					if err != nil {
						created.undo()
					}
				}()
			}
			bs, storeURL, err := a.openStore(ctx)
			if err != nil {
				return err
			}
			if !replace {
				if err := refuseExisting(ctx, bs, label, storeURL); err != nil {
					return err
				}
			}
			st, err := savepoint.Import(ctx, bs, label, r, savepoint.Options{Replace: replace})
			if errors.Is(err, savepoint.ErrExists) {
				return existsError(ctx, bs, label, storeURL, fmt.Errorf("%w: %w", checkpoint.ErrSavepointExists, err))
			}
			if err != nil {
				return verifyFailed(err)
			}
			a.emit(map[string]any{"label": label, "file": file, "files": st.Files, "size": st.Bytes, "uploaded_files": st.Uploaded, "uploaded_bytes": st.UploadedBytes, "verified": true},
				func(w io.Writer) {
					fmt.Fprintf(w, "savepoint %s imported and verified: %s in %s: %s\n",
						label, humanBytes(st.Bytes), plural(st.Files, "file"), sentSummary("uploaded", st))
				})
			return nil
		},
	}
	cmd.Flags().BoolVar(&replace, "replace", false, "replace a savepoint of that label")
	return cmd
}

var errNoStdin = errors.New("no standard input to read")
