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
)

// checkpointInfo is a row of `ls` and the head of `show`.
type checkpointInfo struct {
	ID        string            `json:"id"`
	Status    checkpoint.Status `json:"status"`
	Timestamp time.Time         `json:"timestamp"`
	Age       string            `json:"age"`
	Epoch     uint64            `json:"epoch"`
	Files     int               `json:"files"`
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
	Label    string    `json:"label"`
	Size     int64     `json:"size"`
	Modified time.Time `json:"modified"`
	Age      string    `json:"age"`
}

// describe summarizes the record of id; a record that cannot be read is
// described by its error.
func describe(ctx context.Context, s *blobstorage.Storage, id string, now time.Time) checkpointInfo {
	rec, err := s.LoadRecord(ctx, id)
	if err != nil {
		return checkpointInfo{ID: id, Error: err.Error()}
	}
	return summarize(id, rec, now)
}

// summarize summarizes rec, the record of id.
func summarize(id string, rec *blobstorage.Record, now time.Time) checkpointInfo {
	ci := checkpointInfo{ID: id, Status: rec.Status, Timestamp: rec.Timestamp, Epoch: rec.Epoch}
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

// latestIDs returns the ids the two pointers name ("" when absent).
func latestIDs(ctx context.Context, s *blobstorage.Storage) (latest, completed string, err error) {
	l, err := s.Load(ctx)
	if err != nil {
		return "", "", err
	}
	c, err := s.LoadLatestCompleted(ctx)
	if err != nil {
		return "", "", err
	}
	if l != nil {
		latest = l.ID
	}
	if c != nil {
		completed = c.ID
	}
	return latest, completed, nil
}

func listSavepoints(ctx context.Context, bs blobstore.Blobstore, now time.Time) ([]savepointInfo, error) {
	labels, err := checkpoint.ListSavepoints(ctx, bs)
	if err != nil {
		return nil, err
	}
	out := []savepointInfo{}
	for _, l := range labels {
		info, err := bs.Stat(ctx, checkpoint.SavepointKey(l))
		if errors.Is(err, blobstore.ErrNotFound) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, savepointInfo{Label: l, Size: info.Size, Modified: info.ModTime, Age: humanAge(now.Sub(info.ModTime))})
	}
	return out, nil
}

func (a *app) lsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "ls",
		Short: "List checkpoints and savepoints with status, size and age",
		Long: `ls lists the checkpoints of the store (id, status, epoch of the writer, number of
files, total state size, bytes first uploaded by that checkpoint, age) marking
the ones the latest and latest-completed pointers name, then its savepoints.`,
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
			ids, err := s.IDs(ctx)
			if err != nil {
				return err
			}
			latest, completed, err := latestIDs(ctx, s)
			if err != nil {
				return err
			}
			cps := []checkpointInfo{}
			for _, id := range ids {
				ci := describe(ctx, s, id, now)
				var marks []string
				if id == latest {
					marks = append(marks, "latest")
				}
				if id == completed {
					marks = append(marks, "latest-completed")
				}
				ci.Pointers = marks
				cps = append(cps, ci)
			}
			sps, err := listSavepoints(ctx, bs, now)
			if err != nil {
				return err
			}
			a.emit(map[string]any{"checkpoints": cps, "savepoints": sps}, func(w io.Writer) {
				tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
				if len(cps) == 0 {
					fmt.Fprintln(tw, "no checkpoints")
				} else {
					fmt.Fprintln(tw, "CHECKPOINT\tSTATUS\tEPOCH\tFILES\tSIZE\tNEW\tAGE\tPOINTERS")
					for _, c := range cps {
						if c.Error != "" {
							fmt.Fprintf(tw, "%s\tunreadable\t\t\t\t\t\t%s\n", c.ID, c.Error)
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
			})
			return nil
		},
	}
}
