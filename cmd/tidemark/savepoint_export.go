package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
)

func (a *app) savepointExportCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "export LABEL [FILE|-]",
		Short: "Write savepoint LABEL as one portable tar file",
		Long: `export writes savepoint LABEL as the portable archive: a POSIX tar whose first
entry, MANIFEST.json, holds the checkpoint record and every file's path, size and
SHA-256, followed by the files. tar -x unpacks it, and sha256sum -c checks it
against its manifest (docs/savepoints.md shows how). Every file is checked against
its digest as it is written; a damaged savepoint fails with exit code 3.

FILE is written whole or not at all (a temporary file renamed at the end); without
FILE, or with -, the archive goes to standard output, which must then be discarded
if export fails. savepoint import stores such a file in any store.`,
		Example: `  tidemark savepoint export v1 v1.tar
  tidemark savepoint export v1 - | ssh host 'tidemark savepoint import - v1 --store file:///srv/job'
  mkdir x && tar -xf v1.tar -C x && cd x && jq -r '.files[] | "\(.sha256)  \(.path)"' MANIFEST.json | sha256sum -c`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				return labelArgs("LABEL")(cmd, args)
			}
			return labelArgs("LABEL", "FILE")(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			ctx := cmd.Context()
			label, file := args[0], "-"
			if len(args) == 2 {
				file = args[1]
			}
			if file == "-" && a.env.terminal {
				return usagef("export writes a tar archive: give a FILE, or redirect standard output")
			}
			bs, _, err := a.openReader(ctx)
			if err != nil {
				return err
			}
			if ok, err := bs.Exists(ctx, checkpoint.SavepointKey(label)); err != nil {
				return err
			} else if !ok {
				return fmt.Errorf("no savepoint %q in the store: %w", label, blobstore.ErrNotFound)
			}
			if file == "-" {
				return verifyFailed(checkpoint.ExportSavepoint(ctx, bs, label, a.env.stdout))
			}
			abs, err := filepath.Abs(file)
			if err != nil {
				return err
			}
			tmp, err := os.CreateTemp(filepath.Dir(abs), "."+filepath.Base(abs)+".tmp-*")
			if err != nil {
				return err
			}
			defer func() {
				if err != nil {
					tmp.Close()
					os.Remove(tmp.Name())
				}
			}()
			cw := &countingWriter{w: tmp}
			if err := checkpoint.ExportSavepoint(ctx, bs, label, cw); err != nil {
				return verifyFailed(err)
			}
			if err := tmp.Sync(); err != nil {
				return err
			}
			if err := tmp.Close(); err != nil {
				return err
			}
			if err := os.Rename(tmp.Name(), abs); err != nil {
				return err
			}
			a.emit(map[string]any{"label": label, "file": file, "size": cw.n, "verified": true}, func(w io.Writer) {
				fmt.Fprintf(w, "savepoint %s exported and verified: %s written to %s\n", label, humanBytes(cw.n), file)
			})
			return nil
		},
	}
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
