package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/demo"
)

// isAlias reports whether id is one of the aliases "latest" and
// "latest-completed".
func isAlias(id string) bool { return id == "latest" || id == "latest-completed" }

// resolveID turns the aliases "latest" and "latest-completed" into ids.
func resolveID(ctx context.Context, s *blobstorage.Storage, id string) (string, error) {
	if !isAlias(id) {
		if _, err := checkpoint.ParseID(id); err != nil {
			return "", usageError{fmt.Errorf("%w (or latest, latest-completed)", err)}
		}
		return id, nil
	}
	latest, completed, err := latestIDs(ctx, s)
	if err != nil {
		return "", err
	}
	got := latest
	if id == "latest-completed" {
		got = completed
	}
	if got == "" {
		return "", fmt.Errorf("no %s checkpoint: %w", id, checkpoint.ErrNotFound)
	}
	return got, nil
}

func (a *app) showCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "show ID",
		Short: "Show one checkpoint: record, offsets, state files",
		Long: `show prints the record of one checkpoint: status, timestamp, writer epoch, sink
transaction id, source offsets, operator state, and every state file with its
size, SHA-256 and the key that holds it. ID may be "latest" or "latest-completed".`,
		Example: `  tidemark show latest-completed
  tidemark show ckpt-00000000000000000007 --output json`,
		Args: exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			_, s, err := a.openReader(ctx)
			if err != nil {
				return err
			}
			id, err := resolveID(ctx, s, args[0])
			if err != nil {
				return err
			}
			rec, err := s.LoadRecord(ctx, id)
			if err != nil {
				return err
			}
			ci := summarize(id, rec, time.Now())
			offsets := any(string(rec.Offsets()))
			if o, err := demo.DecodeOffsets(rec.Offsets()); err == nil {
				offsets = o
			}
			operators := map[string]string{}
			for k, v := range rec.Operators {
				operators[k] = string(v)
			}
			a.emit(map[string]any{
				"checkpoint": ci, "txn_id": rec.TxnID, "offsets": offsets,
				"operators": operators, "state_dirs": rec.StateDirs, "files": rec.Files,
				"workers": rec.Workers, "remote": rec.Remote,
			}, func(w io.Writer) {
				fmt.Fprintf(w, "checkpoint  %s\nstatus      %s\ntimestamp   %s (%s ago)\nepoch       %d\ntxn id      %s\n",
					ci.ID, ci.Status, ci.Timestamp.Format(time.RFC3339), ci.Age, ci.Epoch, rec.TxnID)
				fmt.Fprintf(w, "offsets     %s\n", rec.Offsets())
				for _, k := range slices.Sorted(maps.Keys(operators)) {
					fmt.Fprintf(w, "operator    %s = %s\n", k, operators[k])
				}
				fmt.Fprintf(w, "state       %s, %s (%s new in this checkpoint)\n", plural(ci.Files, "file"), humanBytes(ci.Size), humanBytes(ci.New))
				if len(rec.Workers) > 0 {
					fmt.Fprintf(w, "workers     %s\n", describeWorkers(rec.Workers))
				}
				if n, size := remoteTotal(rec.Remote); n > 0 {
					fmt.Fprintf(w, "remote      %s, %s in the store, referenced, not uploaded (--output json lists them)\n", plural(n, "object"), humanBytes(size))
				}
				tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "OWNER\tFILE\tSIZE\tSHA256\tKEY")
				for _, owner := range slices.Sorted(maps.Keys(rec.Files)) {
					for _, f := range rec.Files[owner] {
						fmt.Fprintf(tw, "%s\t%s\t%d\t%.12s…\t%s\n", owner, f.Path, f.Size, f.SHA256, f.Key)
					}
				}
				tw.Flush()
			})
			return nil
		},
	}
}

// describeWorkers says which worker saved which owners: "2 workers:
// w1 (a, b), w2 (c)".
func describeWorkers(assign map[string]string) string {
	byWorker := map[string][]string{}
	for owner, w := range assign {
		byWorker[w] = append(byWorker[w], owner)
	}
	var parts []string
	for _, w := range slices.Sorted(maps.Keys(byWorker)) {
		parts = append(parts, fmt.Sprintf("%s (%s)", w, strings.Join(slices.Sorted(slices.Values(byWorker[w])), ", ")))
	}
	return plural(len(byWorker), "worker") + ": " + strings.Join(parts, ", ")
}

// remoteTotal counts the remote objects of a record and their bytes.
func remoteTotal(remote map[string][]blobstorage.RemoteRef) (n int, size int64) {
	for _, refs := range remote {
		for _, r := range refs {
			n++
			size += r.Size
		}
	}
	return n, size
}
