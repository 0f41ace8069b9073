package main

import (
	"context"
	"encoding/json"
	"errors"
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
)

// isAlias reports whether id is one of the aliases "latest" and
// "latest-completed".
func isAlias(id string) bool {
	return id == blobstorage.PointerLatest || id == blobstorage.PointerLatestCompleted
}

// checkName checks the argument of show (withLabels false) and verify
// (true): a checkpoint id of the form ls lists (checkpoint.ParseID), an
// alias, or for verify a savepoint label. Anything else is a usage error
// saying what is accepted.
func checkName(name string, withLabels bool) error {
	if isAlias(name) {
		return nil
	}
	_, err := checkpoint.ParseID(name)
	if err == nil || withLabels && checkpoint.ValidateLabel(name) == nil {
		return nil
	}
	form := "ckpt-<20 digits>, as tidemark ls lists them"
	if digits, ok := strings.CutPrefix(name, "ckpt-"); ok && len(digits) == 20 && strings.Trim(digits, "0123456789") == "" {
		form = "ckpt-<20 digits> up to " + checkpoint.NewID(^uint64(0)) // the form, out of range
	}
	if !withLabels {
		return usagef("%q is not a checkpoint id (%s), latest or latest-completed", name, form)
	}
	return usagef("%q is neither a checkpoint id (%s), latest, latest-completed nor a savepoint label", name, form)
}

// loadNamed reads the record of the checkpoint name names: an id, or an
// alias (its pointer followed). A pointer that is damaged or names a
// record that does not exist is blobstorage.ErrCorrupt (exit 3).
func loadNamed(ctx context.Context, s *blobstorage.Storage, name string) (*blobstorage.Record, error) {
	if !isAlias(name) {
		rec, err := s.LoadRecord(ctx, name)
		if errors.Is(err, checkpoint.ErrNotFound) {
			return nil, fmt.Errorf("no checkpoint %q in the store (tidemark ls lists them): %w", name, checkpoint.ErrNotFound)
		}
		return rec, err
	}
	rec, err := s.PointerRecord(ctx, name)
	if err != nil {
		return nil, err
	}
	if rec == nil {
		return nil, fmt.Errorf("no %s checkpoint in the store: %w", name, checkpoint.ErrNotFound)
	}
	return rec, nil
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
		Args: func(cmd *cobra.Command, args []string) error {
			if err := exactArgs("ID")(cmd, args); err != nil {
				return err
			}
			return checkName(args[0], false)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			_, s, err := a.openReader(ctx)
			if err != nil {
				return err
			}
			rec, err := loadNamed(ctx, s, args[0])
			if err != nil {
				return err
			}
			ci := summarize(rec.ID, rec, time.Now())
			offsets := sourceOffsets(rec.Offsets())
			operators := map[string]string{}
			for k, v := range rec.Operators {
				operators[k] = string(v)
			}
			doc := map[string]any{
				"checkpoint": ci, "txn_id": rec.TxnID, "offsets": offsets,
				"operators": operators, "state_dirs": rec.StateDirs, "files": rec.Files,
				"workers": rec.Workers, "remote": rec.Remote,
			}
			if rec.EncryptionKeyID != "" {
				doc["encryption_key_id"] = rec.EncryptionKeyID
			}
			a.emit(doc, func(w io.Writer) {
				fmt.Fprintf(w, "checkpoint  %s\nstatus      %s\ntimestamp   %s (%s ago)\nepoch       %d\ntxn id      %s\n",
					ci.ID, ci.Status, ci.Timestamp.Format(time.RFC3339), ci.Age, ci.Epoch, rec.TxnID)
				fmt.Fprintf(w, "offsets     %s\n", rec.Offsets())
				for _, k := range slices.Sorted(maps.Keys(operators)) {
					fmt.Fprintf(w, "operator    %s = %s\n", k, operators[k])
				}
				fmt.Fprintf(w, "state       %s, %s (%s new in this checkpoint)\n", plural(ci.Files, "file"), humanBytes(ci.Size), humanBytes(ci.New))
				if rec.EncryptionKeyID != "" {
					fmt.Fprintf(w, "encryption  client-side, key id %s (restoring needs that key)\n", rec.EncryptionKeyID)
				}
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

// sourceOffsets is a checkpoint's source offsets as show prints them:
// the JSON document the source recorded, as it is, whatever its source;
// offsets that are not JSON (an older or foreign writer) as a string.
func sourceOffsets(b []byte) any {
	if len(b) > 0 && json.Valid(b) {
		return json.RawMessage(b)
	}
	return string(b)
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
