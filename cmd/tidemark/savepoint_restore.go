package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/savepoint"
)

func (a *app) savepointRestoreCmd() *cobra.Command {
	var from string
	var newJob bool
	cmd := &cobra.Command{
		Use:   "restore LABEL",
		Short: "Make savepoint LABEL the latest completed checkpoint of the store",
		Long: `restore extracts savepoint LABEL (from the store, or from --from URL), verifying
every digest, and saves it as the latest completed checkpoint of the store, so the
job resumes from it on its next start.

Onto a fresh store (another region, after 'savepoint cp') the checkpoint keeps its
id. Onto a store with newer checkpoints - rolling back to the savepoint taken before
an upgrade - it starts a new lineage: a fresh id after every existing checkpoint,
which stay until retention drops them. Output the job committed after the savepoint
is produced again by the resumed job, as after any rollback.

A savepoint of a job whose state runs in remote mode carries the SSTs that lived in
the store (under remote/); restore uploads them into the target store under the same
keys, so the job resumes there in remote mode.

Every checkpoint and savepoint carries the id of its job. A savepoint of another job
than the one whose checkpoints the store holds is refused: the two jobs' sources and
outputs are unrelated. --new-job starts a new job from the savepoint's state instead:
a new job id and a new lineage after the store's checkpoints; the new job reads again
from the savepoint's offsets, and the output the store's sink holds from before is the
old job's. Savepoints made before job ids existed restore anywhere.

It takes the writer role, which fences a job running on the store, but only after
every check that can refuse has passed: the savepoint exists and verifies, belongs
to the store's job, and the store is a Tidemark store whose endpoint enforces
conditional writes. A refused restore changes nothing.`,
		Example: `  tidemark savepoint restore v1 --store s3://dr-bucket/wordcount
  tidemark savepoint restore v1 --from s3://backup/wordcount --store file:///srv/job
  tidemark demo --store s3://dr-bucket/wordcount    # resumes from the savepoint`,
		Args: labelArgs("LABEL"),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			ctx := cmd.Context()
			label := args[0]
			// A new store directory that gets no checkpoint (the
			// savepoint is damaged or missing) is removed again.
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
			// The savepoint is read from a store that must exist (a
			// missing directory is said so, not "no savepoint"); the
			// store restored into may be a new one.
			srcURL := from
			if srcURL == "" {
				srcURL = storeURL
			}
			src, err := openStoreURL(ctx, srcURL, mustExist(srcURL))
			if err != nil {
				return err
			}
			info, err := savepoint.Stat(ctx, src, label)
			if errors.Is(err, blobstore.ErrNotFound) {
				return fmt.Errorf("no savepoint %q in the store: %w", label, err)
			}
			if err != nil && !corrupt(err) {
				return err
			}
			// Verify before taking the writer role: a refused restore must
			// not fence the job running on the store.
			if _, err := a.readSavepoint(ctx, src, label, info); err != nil {
				return fmt.Errorf("savepoint restore %q: %w", label, verifyFailed(err))
			}
			// The job's check, reading only, before the writer role:
			// RestoreSavepointWith checks again under it.
			opts := checkpoint.RestoreOptions{NewJob: newJob}
			rec, err := checkpoint.SavepointRecord(ctx, src, label)
			if err != nil {
				return fmt.Errorf("savepoint restore %q: %w", label, err)
			}
			if err := checkpoint.CheckJob(ctx, readStorage(bs), rec, opts); err != nil {
				return otherJobError(label, err)
			}
			size := info.Bytes
			dst, cleanup, err := writeStorage(ctx, bs, blobstorage.Options{})
			if err != nil {
				return err
			}
			defer cleanup()
			p := a.newProgress("restore "+label, size)
			id, err := checkpoint.RestoreSavepointWith(ctx, dst, p.observed(src), label, opts)
			p.done()
			if err != nil {
				return otherJobError(label, err)
			}
			from, job := "", ""
			if cp, err := dst.LoadSpecific(ctx, id); err == nil {
				from, job = string(cp.Source[checkpoint.RestoredFromKey]), cp.JobID
			}
			a.emit(map[string]any{"label": label, "checkpoint": id, "rolled_back_from": from, "store": storeURL, "job": job, "new_job": newJob}, func(w io.Writer) {
				if newJob {
					fmt.Fprintf(w, "savepoint %s restored as checkpoint %s, the first of a new job %s; it is now the latest completed checkpoint of %s\n", label, id, job, storeURL)
					return
				}
				if from != "" {
					fmt.Fprintf(w, "savepoint %s (checkpoint %s) restored as checkpoint %s, a new lineage after the store's checkpoints at least as new; it is now the latest completed checkpoint of %s\n", label, from, id, storeURL)
					return
				}
				fmt.Fprintf(w, "savepoint %s restored as checkpoint %s, now the latest completed checkpoint of %s\n", label, id, storeURL)
			})
			return nil
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "read the savepoint from this store URL instead of --store")
	cmd.Flags().BoolVar(&newJob, "new-job", false, "start a new job from the savepoint's state (required for a savepoint of another job than the store's)")
	return cmd
}

// otherJobError says what to do about a savepoint of another job; other
// errors are returned as they are.
func otherJobError(label string, err error) error {
	var m *checkpoint.JobMismatch
	if !errors.As(err, &m) {
		return err
	}
	return fmt.Errorf("savepoint %s is of job %s, and the store holds the checkpoints of job %s: restoring it would mix two jobs' histories and outputs; restore it into an empty store, or start a new job from it here with --new-job (nothing was changed): %w",
		label, m.Job, m.Store, checkpoint.ErrOtherJob)
}
