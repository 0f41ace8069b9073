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

func (a *app) savepointRmCmd() *cobra.Command {
	var grace, wait time.Duration
	cmd := &cobra.Command{
		Use:   "rm LABEL",
		Short: "Remove savepoint LABEL and the content no other savepoint uses",
		Long: `rm deletes savepoint LABEL, then the files of the savepoint area that no other
savepoint references and that are older than --grace (a copy or import interrupted
within it keeps what it sent, and resends nothing when run again); a later rm frees
the rest. A label that does not exist is an error (exit 1).

While a savepoint create, cp, import, restore or export runs on the store, rm waits
for it up to --wait, then refuses and changes nothing: a create that found a file
present and did not upload it again must not see it deleted.

rm takes no writer role: it is safe beside a job running on the store. It refuses a
prefix that is not a Tidemark store (see tidemark gc --help) and deletes nothing there.`,
		Example: `  tidemark savepoint rm before-upgrade
  tidemark savepoint rm nightly-42 --grace 0 --wait 10m`,
		Args: labelArgs("LABEL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			label := args[0]
			bs, s, err := a.openReader(ctx) // a missing directory is an error, not "no savepoint"
			if err != nil {
				return err
			}
			// A user's savepoints/ folder is not ours: refuse before deleting.
			if err := s.CheckStore(ctx); err != nil {
				u, _ := a.storeURL()
				return fmt.Errorf("savepoint rm: %s: %w", redactURL(u), err)
			}
			opts := savepoint.Options{Grace: grace, Locks: savepoint.LockOptions{Wait: wait}}
			if grace == 0 {
				opts.Grace = -1
			}
			if wait == 0 {
				opts.Locks.Wait = -1
			}
			st, err := savepoint.Delete(ctx, bs, label, opts)
			if errors.Is(err, checkpoint.ErrBlobNotFound) {
				return fmt.Errorf("no savepoint %q: %w", label, checkpoint.ErrBlobNotFound)
			}
			if errors.Is(err, savepoint.ErrLocked) {
				return fmt.Errorf("savepoint %s not removed, nothing changed: %w (try again later, or give a longer --wait)", label, err)
			}
			if err != nil {
				return err
			}
			a.emit(map[string]any{"label": label, "removed": true, "freed_objects": st.Objects, "freed_bytes": st.Bytes,
				"kept_objects": st.Kept, "kept_bytes": st.KeptBytes},
				func(w io.Writer) {
					fmt.Fprintf(w, "savepoint %s removed; %s freed (%s no other savepoint uses)", label, humanBytes(st.Bytes), plural(st.Objects, "object"))
					if st.Kept > 0 {
						fmt.Fprintf(w, "; %s (%s) younger than --grace kept for a later rm", humanBytes(st.KeptBytes), plural(st.Kept, "unused object"))
					}
					fmt.Fprintln(w)
				})
			return nil
		},
	}
	cmd.Flags().DurationVar(&grace, "grace", savepoint.DefaultGrace, "free unused content only once older than this (0: at once)")
	cmd.Flags().DurationVar(&wait, "wait", savepoint.DefaultLockWait, "wait this long for savepoint operations in progress (0: do not wait)")
	return cmd
}
