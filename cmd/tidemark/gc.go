package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tidemark-io/tidemark/blobstorage"
)

// gcCmd is `tidemark gc`.
func (a *app) gcCmd() *cobra.Command {
	var dryRun, confirm, fence bool
	var keep int
	var grace time.Duration
	cmd := &cobra.Command{
		Use:   "gc",
		Short: "Apply retention: delete checkpoints and files nothing needs",
		Long: `gc keeps the newest --keep completed checkpoints (and the latest one, pinned ones
and saves in progress) and deletes older checkpoints, abandoned prepared ones, shared
files no kept checkpoint references and leftovers of crashed saves and incomplete
multipart uploads older than --grace. Savepoints are never touched.

gc runs beside a running job: it never takes the writer role, so it fences nothing.
It leaves alone what the job may still need: the checkpoints _latest and
_latest-completed name, those newer than _latest the job (the epoch in _writer) has
saved or is saving, the tables it uploaded for them, pinned checkpoints (a restore
in progress), and a record rewritten since gc read it. See docs/gc.md.

Remote objects (state in remote mode, under remote/) that no kept checkpoint
references and older than --grace are deleted too, except those of the generation
of the writer named in _writer: only that job knows which its open state uses, and
it collects them itself. To delete those of a job that is stopped for good, run
gc --confirm --fence: it takes the writer role first, which fences a job still
running on the store.

Without --confirm, gc only reads: it lists every checkpoint it would keep or drop
and every key it would delete, each with its reason, and deletes nothing
(--dry-run says the same explicitly).

gc considers only keys of Tidemark's layout: anything else in the prefix is left
alone. It refuses a prefix that is not a Tidemark store (no _tidemark mark, and
not every key of Tidemark's layout with a valid checkpoint or savepoint), such as a
bucket root or a user's folder, and writes nothing there. gc never creates a
store: a missing directory or an empty prefix (a mistyped path) is an error.`,
		Example: `  tidemark gc --keep 5             # what keeping 5 would delete, and why
  tidemark gc --keep 5 --confirm   # delete what that listed
  tidemark gc --output json | jq '.report.deletions[].key'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if keep <= 0 {
				return usagef("gc: --keep must be at least 1, not %d (the latest completed checkpoint is always kept)", keep)
			}
			if grace <= 0 {
				// A save uploads its files before its record names
				// them: without a grace period gc could delete what a
				// writer is uploading right now.
				return usagef("gc: --grace must be positive, not %v: it keeps gc from deleting files a writer has uploaded but not yet recorded", grace)
			}
			if dryRun && confirm {
				return usagef("gc: --dry-run and --confirm contradict each other")
			}
			if fence && !confirm {
				return usagef("gc: --fence takes the writer role to delete: it needs --confirm")
			}
			dryRun = !confirm
			// gc operates on an existing store and never creates one: a
			// missing directory stays missing (must_exist), and a prefix
			// that is not a Tidemark store is refused before anything.
			bs, s, err := a.openReader(ctx)
			if err != nil {
				return err
			}
			if err := s.CheckStore(ctx); err != nil {
				u, _ := a.storeURL()
				return fmt.Errorf("gc: %s: %w", redactURL(u), err)
			}
			opts := blobstorage.Options{Keep: keep, Grace: grace}
			// No writer role: gc runs beside the job (see the package
			// doc of blobstorage). Only --fence takes it, fencing the job.
			s = blobstorage.New(bs, "", opts)
			if fence {
				fmt.Fprintln(a.env.stderr, "gc: --fence: taking the writer role; a job running on this store is fenced and stops")
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
				for _, v := range rep.Verdicts {
					what := "drop"
					if v.Keep {
						what = "keep"
					}
					fmt.Fprintf(w, "%s %s: %s\n", what, v.ID, describeReason(v.Reason))
				}
				for _, d := range rep.Deletions {
					fmt.Fprintf(w, "%s %s (%s): %s\n", verb, d.Key, humanBytes(d.Size), describeReason(d.Reason))
				}
				if rep.SharedKept != "" {
					fmt.Fprintf(w, "shared files kept: %s\n", rep.SharedKept)
				}
				if rep.RemoteKept != "" {
					fmt.Fprintf(w, "remote objects kept: %s\n", rep.RemoteKept)
				}
				if rep.FilesKept != "" {
					fmt.Fprintf(w, "files kept: %s\n", rep.FilesKept)
				}
				fmt.Fprintf(w, "gc: kept %s %v\n", plural(len(rep.Retained), "checkpoint"), rep.Retained)
				fmt.Fprintf(w, "gc: %s %s %v, %s (%s), %s, %s, %s, %s\n",
					verb, plural(len(rep.Dropped), "checkpoint"), rep.Dropped, plural(rep.Objects, "object"), humanBytes(rep.Bytes),
					plural(rep.SharedObjects, "unreferenced shared file"), plural(rep.RemoteObjects, "remote object"), plural(rep.Pins, "expired pin"), plural(rep.AbortedUploads, "incomplete upload"))
				if dryRun && len(rep.Deletions) > 0 {
					fmt.Fprintln(w, "gc: nothing was deleted; run again with --confirm to delete")
				}
			})
			return nil
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "report what would be deleted, delete nothing (the default without --confirm)")
	cmd.Flags().BoolVar(&confirm, "confirm", false, "delete: without it gc only reports")
	cmd.Flags().BoolVar(&fence, "fence", false, "with --confirm: take the writer role first (fences a running job), to delete a stopped job's unreferenced remote objects too")
	cmd.Flags().DurationVar(&grace, "grace", blobstorage.DefaultGrace, "how old a leftover (crashed save, unreferenced shared file, incomplete upload) must be before it is deleted")
	cmd.Flags().IntVar(&keep, "keep", blobstorage.DefaultKeep, "completed checkpoints to keep")
	return cmd
}

// describeReason says a GC reason in words, naming the flag that sets
// what it depends on.
func describeReason(r blobstorage.Reason) string {
	text := r.Describe()
	switch r {
	case blobstorage.KeepNewest, blobstorage.DropOld:
		text = strings.Replace(text, "(Options.Keep)", "(--keep)", 1)
	}
	return text
}
