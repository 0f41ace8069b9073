package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/savepoint"
)

// checkpointInfo is a row of `ls` and the head of `show`.
type checkpointInfo struct {
	ID        string            `json:"id"`
	Status    checkpoint.Status `json:"status"`
	Timestamp time.Time         `json:"timestamp"`
	Age       string            `json:"age"`
	Epoch     uint64            `json:"epoch"`
	// Job is the id of the job the checkpoint belongs to ("" for a
	// record from before job ids).
	Job   string `json:"job,omitempty"`
	Files int    `json:"files"`
	// Size is the checkpoint's total state size; New is the part first
	// uploaded by this checkpoint (the rest is shared with older ones).
	Size int64 `json:"size"`
	New  int64 `json:"new_bytes"`
	// Pointers names the pointers at this checkpoint: "latest",
	// "latest-completed", both or none.
	Pointers []string `json:"pointers,omitempty"`
	Error    string   `json:"error,omitempty"` // a record that could not be read
}

type savepointInfo struct {
	Label string `json:"label"`
	// Size is the total of its files' sizes (for a savepoint stored as
	// one archive: the archive's size).
	Size int64 `json:"size"`
	// Format is "manifest" (stored by content) or "archive".
	Format   string    `json:"format"`
	Error    string    `json:"error,omitempty"` // a manifest that could not be read
	Modified time.Time `json:"modified"`
	Age      string    `json:"age"`
	// EncryptionKeyID is the key id its manifest records for its
	// content (client-side encryption), if any.
	EncryptionKeyID string `json:"encryption_key_id,omitempty"`
}

// describe summarizes the record of id; a record that cannot be read is
// described by its error, which is returned too.
func describe(ctx context.Context, s *blobstorage.Storage, id string, now time.Time) (checkpointInfo, error) {
	rec, err := s.LoadRecord(ctx, id)
	if err != nil {
		return checkpointInfo{ID: id, Error: err.Error()}, err
	}
	return summarize(id, rec, now), nil
}

// lsProblems is the error of an ls that listed everything but found
// records or pointers it could not read: corrupt or missing data (exit 3)
// when any is, else the first error (exit 1).
func lsProblems(problems []error) error {
	if len(problems) == 0 {
		return nil
	}
	first := problems[0]
	for _, p := range problems {
		if corrupt(p) {
			first = p
			break
		}
	}
	// The listing shows each problem; the error says how many, once,
	// and carries the first for the exit code.
	what := "1 record or pointer is"
	if len(problems) > 1 {
		what = fmt.Sprintf("%d records or pointers are", len(problems))
	}
	return summaryError{msg: "ls: " + what + " unreadable or damaged (listed above)", err: first}
}

// summaryError says msg, and wraps err (for the exit code) without
// repeating it.
type summaryError struct {
	msg string
	err error
}

func (e summaryError) Error() string { return e.msg }
func (e summaryError) Unwrap() error { return e.err }

// summarize summarizes rec, the record of id.
func summarize(id string, rec *blobstorage.Record, now time.Time) checkpointInfo {
	ci := checkpointInfo{ID: id, Status: rec.Status, Timestamp: rec.Timestamp, Epoch: rec.Epoch, Job: rec.JobID}
	if ci.Status == "" {
		ci.Status = checkpoint.StatusCompleted
	}
	ci.Age = humanAge(now.Sub(rec.Timestamp))
	for owner, refs := range rec.Files {
		for _, f := range refs {
			ci.Files++
			ci.Size += f.Size
			if rec.Introduced(owner, f) {
				ci.New += f.Size
			}
		}
	}
	return ci
}

// pointerInfo is a pointer in `ls`: the checkpoint it names ("" for
// none), or why it could not be followed.
type pointerInfo struct {
	Name  string `json:"name"`
	ID    string `json:"id,omitempty"`
	Error string `json:"error,omitempty"`
	err   error
}

// readPointers reads the two pointers without reading their records. A
// pointer that cannot be read is returned with its error, not as an error:
// ls shows it with the rest.
func readPointers(ctx context.Context, s *blobstorage.Storage) []pointerInfo {
	var out []pointerInfo
	for _, name := range []string{blobstorage.PointerLatest, blobstorage.PointerLatestCompleted} {
		id, err := s.PointerID(ctx, name)
		p := pointerInfo{Name: name, ID: id, err: err}
		if err != nil {
			p.Error = err.Error()
		}
		out = append(out, p)
	}
	return out
}

func listSavepoints(ctx context.Context, bs blobstore.Blobstore, now time.Time) ([]savepointInfo, error) {
	labels, err := checkpoint.ListSavepoints(ctx, bs)
	if err != nil {
		return nil, err
	}
	out := []savepointInfo{}
	for _, l := range labels {
		info, err := savepoint.Stat(ctx, bs, l)
		sp := savepointInfo{Label: l, Size: info.Bytes, Format: info.Format.String(), EncryptionKeyID: info.EncryptionKeyID}
		if corrupt(err) { // listed, and said so
			sp.Format, sp.Error = savepoint.FormatManifest.String(), err.Error()
			info.ModTime = time.Time{}
			if oi, serr := bs.Stat(ctx, checkpoint.SavepointKey(l)); serr == nil {
				info.ModTime = oi.ModTime
			}
			err = nil
		}
		if errors.Is(err, blobstore.ErrNotFound) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, err
		}
		sp.Modified, sp.Age = info.ModTime, humanAge(now.Sub(info.ModTime))
		out = append(out, sp)
	}
	return out, nil
}

func (a *app) lsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "ls",
		Short: "List checkpoints and savepoints with status, size and age",
		Long: `ls lists the checkpoints of the store (id, status, epoch of the writer, number of
files, total state size, bytes first uploaded by that checkpoint, age) marking
the ones the latest and latest-completed pointers name, then its savepoints, and,
for a replica ('tidemark replicate'), what its replicator last wrote: the source,
the latest checkpoint copied and the recovery point.

ls is the diagnosis tool: a record it cannot read and a pointer that is damaged
(does not decode, names an invalid id, or names a checkpoint with no record) are
listed with what is wrong, after everything else ls could read, and ls then exits
3 (1 when what failed was a read, not the data).`,
		Example: `  tidemark ls --store file://$PWD/.tidemark/store
  TIDEMARK_STORE=s3://bucket/job tidemark ls --output json | jq '.checkpoints[].id'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			bs, s, err := a.openReader(ctx)
			if err != nil {
				return err
			}
			now := time.Now()
			// The records first, then the pointers: a pointer read after
			// the listing names a listed record or a newer one (read
			// below), never one a live writer's GC dropped meanwhile.
			ids, err := s.IDs(ctx)
			if err != nil {
				return err
			}
			ptrs := readPointers(ctx, s)
			var problems []error
			cps := []checkpointInfo{}
			index := map[string]int{}
			add := func(ci checkpointInfo, err error) {
				index[ci.ID] = len(cps)
				cps = append(cps, ci)
				if err != nil {
					problems = append(problems, fmt.Errorf("checkpoint %s: %w", ci.ID, err))
				}
			}
			for _, id := range ids {
				ci, err := describe(ctx, s, id, now)
				if errors.Is(err, checkpoint.ErrNotFound) {
					continue // removed meanwhile (GC)
				}
				add(ci, err)
			}
			for i, p := range ptrs {
				if p.err != nil {
					problems = append(problems, fmt.Errorf("pointer %s: %w", p.Name, p.err))
					continue
				}
				if p.ID == "" {
					continue
				}
				if _, ok := index[p.ID]; !ok {
					// Saved after the listing, or dangling.
					ci, err := describe(ctx, s, p.ID, now)
					if errors.Is(err, checkpoint.ErrNotFound) {
						err = fmt.Errorf("%w: names %s, which has no record (%w)", blobstorage.ErrCorrupt, p.ID, checkpoint.ErrNotFound)
						ptrs[i].err, ptrs[i].Error = err, err.Error()
						problems = append(problems, fmt.Errorf("pointer %s: %w", p.Name, err))
						continue
					}
					add(ci, err)
				}
				c := &cps[index[p.ID]]
				c.Pointers = append(c.Pointers, p.Name)
			}
			sps, err := listSavepoints(ctx, bs, now)
			if err != nil {
				return err
			}
			repl, err := blobstorage.ReadReplicationStatus(ctx, bs)
			if err != nil {
				problems = append(problems, err)
			}
			out := map[string]any{"checkpoints": cps, "savepoints": sps, "pointers": ptrs}
			if repl != nil {
				out["replication"] = replicationInfo{ReplicationStatus: *repl, RecoveryPoint: repl.RecoveryPoint(now).Seconds()}
			}
			a.emit(out, func(w io.Writer) {
				tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
				if len(cps) == 0 {
					fmt.Fprintln(tw, "no checkpoints")
				} else {
					fmt.Fprintln(tw, "CHECKPOINT\tSTATUS\tEPOCH\tFILES\tSIZE\tNEW\tAGE\tPOINTERS")
					for _, c := range cps {
						if c.Error != "" {
							fmt.Fprintf(tw, "%s\tunreadable\t\t\t\t\t\t%s\t%s\n", c.ID, strings.Join(c.Pointers, ","), c.Error)
							continue
						}
						fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", c.ID, c.Status, c.Epoch, c.Files,
							humanBytes(c.Size), humanBytes(c.New), c.Age, strings.Join(c.Pointers, ","))
					}
				}
				fmt.Fprintln(tw)
				if len(sps) == 0 {
					fmt.Fprintln(tw, "no savepoints")
				} else {
					fmt.Fprintln(tw, "SAVEPOINT\tSIZE\tAGE")
					for _, sp := range sps {
						fmt.Fprintf(tw, "%s\t%s\t%s\n", sp.Label, humanBytes(sp.Size), sp.Age)
					}
				}
				tw.Flush()
				if repl != nil {
					fmt.Fprintln(w)
					describeReplication(w, repl, now)
				}
				for _, p := range ptrs {
					if p.Error != "" {
						fmt.Fprintf(w, "\npointer %s: %s\n", p.Name, p.Error)
					}
				}
			})
			return lsProblems(problems)
		},
	}
}

// replicationInfo is a replica's status in ls: as its replicator wrote
// it, and the recovery point it states now.
type replicationInfo struct {
	blobstorage.ReplicationStatus
	RecoveryPoint float64 `json:"recovery_point_seconds"`
}

// describeReplication says what a replica's status says, in two lines.
func describeReplication(w io.Writer, st *blobstorage.ReplicationStatus, now time.Time) {
	src := st.Source
	if src == "" {
		src = "its source"
	}
	fmt.Fprintf(w, "replica of %s, written by %s (epoch %d)", src, strings.TrimPrefix(st.Replicator, "replicator/"), st.Epoch)
	if st.Checkpoint != "" {
		fmt.Fprintf(w, ": latest completed %s, completed in the source %s ago", st.Checkpoint, humanAge(now.Sub(st.SourceCompleted)))
	}
	fmt.Fprintln(w)
	if st.BehindSince.IsZero() {
		fmt.Fprintf(w, "recovery point 0s (caught up when last written, %s ago)\n", humanAge(now.Sub(st.Updated)))
		return
	}
	fmt.Fprintf(w, "recovery point %s: the source completed a checkpoint the replica lacks %s ago (status written %s ago)\n",
		st.RecoveryPoint(now).Round(time.Millisecond), humanAge(now.Sub(st.BehindSince)), humanAge(now.Sub(st.Updated)))
}
