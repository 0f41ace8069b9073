package main

import (
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
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

func (a *app) savepointLsCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Short:   "List savepoints with size and age",
		Example: `  tidemark savepoint ls --output json`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			bs, _, err := a.openStore(ctx)
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
				tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "SAVEPOINT\tSIZE\tAGE\tMODIFIED")
				for _, sp := range sps {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", sp.Label, humanBytes(sp.Size), sp.Age, sp.Modified.Format(time.RFC3339))
				}
				tw.Flush()
			})
			return nil
		},
	}
}

func (a *app) savepointRmCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "rm LABEL",
		Short:   "Remove savepoint LABEL",
		Long:    `rm deletes savepoints/LABEL. A label that does not exist is an error (exit 1).`,
		Example: `  tidemark savepoint rm before-upgrade`,
		Args:    labelArgs("LABEL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			label := args[0]
			bs, _, err := a.openStore(ctx)
			if err != nil {
				return err
			}
			ok, err := bs.Exists(ctx, checkpoint.SavepointKey(label))
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("no savepoint %q: %w", label, checkpoint.ErrBlobNotFound)
			}
			if err := checkpoint.DeleteSavepoint(ctx, bs, label); err != nil {
				return err
			}
			a.emit(map[string]any{"label": label, "removed": true}, func(w io.Writer) {
				fmt.Fprintf(w, "savepoint %s removed\n", label)
			})
			return nil
		},
	}
}

func (a *app) savepointCpCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "cp LABEL SRC_URL DST_URL",
		Short: "Copy savepoint LABEL from one store to another, verifying it",
		Long: `cp streams savepoints/LABEL from the store SRC_URL to the store DST_URL (another
bucket, region, or a directory) without a local copy, checking the archive's
manifest, every file's size and SHA-256 on the way. A damaged savepoint is not
copied (nothing appears in DST) and the exit code is 3.`,
		Example: `  tidemark savepoint cp v1 file://$PWD/.tidemark/store 's3://dr-bucket/wordcount?region=eu-west-2'
  tidemark savepoint cp v1 s3://prod/job s3://backup/job --output json`,
		Args: labelArgs("LABEL", "SRC_URL", "DST_URL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			label, srcURL, dstURL := args[0], args[1], args[2]
			src, err := blobstore.Open(ctx, srcURL)
			if err != nil {
				return err
			}
			dst, err := blobstore.Open(ctx, dstURL)
			if err != nil {
				return err
			}
			info, err := src.Stat(ctx, checkpoint.SavepointKey(label))
			if errors.Is(err, blobstore.ErrNotFound) {
				return fmt.Errorf("no savepoint %q in %s: %w", label, srcURL, err)
			}
			if err != nil {
				return err
			}
			start := time.Now()
			p := a.newProgress("copy "+label, info.Size)
			err = checkpoint.CopySavepoint(ctx, p.observed(src), dst, label)
			p.done()
			if err != nil {
				return verifyFailed(err)
			}
			secs := time.Since(start).Seconds()
			a.emit(map[string]any{"label": label, "from": srcURL, "to": dstURL, "size": info.Size, "verified": true, "seconds": secs},
				func(w io.Writer) {
					fmt.Fprintf(w, "savepoint %s copied and verified: %s from %s to %s in %.1fs\n",
						label, humanBytes(info.Size), srcURL, dstURL, secs)
				})
			return nil
		},
	}
}

// gcCmd is `tidemark gc`.
func (a *app) gcCmd() *cobra.Command {
	var dryRun bool
	var keep int
	cmd := &cobra.Command{
		Use:   "gc",
		Short: "Apply retention: delete checkpoints and files nothing needs",
		Long: `gc keeps the newest --keep completed checkpoints (and the latest one, pinned ones
and saves in progress) and deletes older checkpoints, abandoned prepared ones, shared
files no kept checkpoint references and leftovers of crashed saves (after a grace
period of an hour). Savepoints are never touched.

--dry-run only reads: it reports what a real gc would delete now, deletes and writes
nothing, and does not take the writer role, so it is safe against a running job.

A real gc takes the writer role, which fences a job running on the store: run it
when the job is stopped (the demo job garbage-collects by itself). Before that it
checks that the store enforces conditional writes (see tidemark probe) and
refuses to run on an endpoint that ignores them.`,
		Example: `  tidemark gc --dry-run
  tidemark gc --keep 5 --output json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if keep <= 0 {
				return usagef("gc: --keep must be positive")
			}
			bs, _, err := a.openStore(ctx)
			if err != nil {
				return err
			}
			opts := blobstorage.Options{Keep: keep}
			// A dry run reads only: taking the writer role (Acquire)
			// would fence the very job whose store is being inspected.
			s := blobstorage.New(bs, "", opts)
			if !dryRun {
				ws, cleanup, err := writeStorage(ctx, bs, opts)
				if err != nil {
					return err
				}
				defer cleanup()
				s = ws
			}
			rep, err := s.GC(ctx, blobstorage.GCOptions{DryRun: dryRun})
			if err != nil {
				return err
			}
			a.emit(map[string]any{"dry_run": dryRun, "report": rep}, func(w io.Writer) {
				verb := "deleted"
				if dryRun {
					verb = "would delete"
				}
				fmt.Fprintf(w, "gc: kept %d checkpoints %v\n", len(rep.Retained), rep.Retained)
				fmt.Fprintf(w, "gc: %s %d checkpoints %v, %d objects (%s), %d unreferenced shared files, %d expired pins, %d incomplete uploads\n",
					verb, len(rep.Dropped), rep.Dropped, rep.Objects, humanBytes(rep.Bytes), rep.SharedObjects, rep.Pins, rep.AbortedUploads)
			})
			return nil
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "report what would be deleted, delete nothing")
	cmd.Flags().IntVar(&keep, "keep", blobstorage.DefaultKeep, "completed checkpoints to keep")
	return cmd
}
