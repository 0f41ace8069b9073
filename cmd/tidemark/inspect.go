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

	"github.com/tidemark-io/tidemark/archive"
	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/demo"
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
	Size   int64  `json:"size"`
	New    int64  `json:"new_bytes"`
	Latest string `json:"latest,omitempty"` // "latest", "latest-completed" or both
	Error  string `json:"error,omitempty"`  // a record that could not be read
}

type savepointInfo struct {
	Label    string    `json:"label"`
	Size     int64     `json:"size"`
	Modified time.Time `json:"modified"`
	Age      string    `json:"age"`
}

const checkpointsPrefix = "checkpoints/"

// checkpointIDs lists the ids that have a record in the store.
func checkpointIDs(ctx context.Context, bs blobstore.Blobstore) ([]string, error) {
	var ids []string
	for info, err := range bs.List(ctx, checkpointsPrefix) {
		if err != nil {
			return nil, err
		}
		id, rest, ok := strings.Cut(strings.TrimPrefix(info.Key, checkpointsPrefix), "/")
		if ok && rest == "checkpoint.json" {
			ids = append(ids, id)
		}
	}
	return ids, nil
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
			// Private files live under the checkpoint's own directory;
			// shared ones carry the id of the checkpoint that first
			// uploaded them in their key.
			if strings.HasPrefix(f.Key, checkpointsPrefix+id+"/") || strings.HasPrefix(f.Key, "shared/"+owner+"/"+id+"-") {
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
			ids, err := checkpointIDs(ctx, bs)
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
				ci.Latest = strings.Join(marks, ",")
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
							humanBytes(c.Size), humanBytes(c.New), c.Age, c.Latest)
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

// isAlias reports whether id is one of the aliases "latest" and
// "latest-completed".
func isAlias(id string) bool { return id == "latest" || id == "latest-completed" }

// resolveID turns the aliases "latest" and "latest-completed" into ids.
func resolveID(ctx context.Context, s *blobstorage.Storage, id string) (string, error) {
	if !isAlias(id) {
		if err := checkpoint.ValidateID(id); err != nil {
			return "", usageError{err}
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
				return fmt.Errorf("checkpoint %s: %v", id, err)
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
			}, func(w io.Writer) {
				fmt.Fprintf(w, "checkpoint  %s\nstatus      %s\ntimestamp   %s (%s ago)\nepoch       %d\ntxn id      %s\n",
					ci.ID, ci.Status, ci.Timestamp.Format(time.RFC3339), ci.Age, ci.Epoch, rec.TxnID)
				fmt.Fprintf(w, "offsets     %s\n", rec.Offsets())
				for _, k := range slices.Sorted(maps.Keys(operators)) {
					fmt.Fprintf(w, "operator    %s = %s\n", k, operators[k])
				}
				fmt.Fprintf(w, "state       %d files, %s (%s new in this checkpoint)\n", ci.Files, humanBytes(ci.Size), humanBytes(ci.New))
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

func (a *app) verifyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "verify ID|LABEL",
		Short: "Re-read a checkpoint or savepoint and check every digest",
		Long: `verify reads every byte of a checkpoint's state files (or of a savepoint archive)
from the store and checks each file's size and SHA-256 against the record (or the
archive manifest). It writes nothing. Exit 3 when anything is missing or corrupt.
The argument is a checkpoint id (or "latest", "latest-completed") when the store has
such a checkpoint, else a savepoint label.`,
		Example: `  tidemark verify latest-completed
  tidemark verify before-upgrade --store s3://backup/wordcount
  tidemark verify before-upgrade --output json || echo "corrupt: exit $?"`,
		Args: exactArgs("ID|LABEL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			bs, s, err := a.openReader(ctx)
			if err != nil {
				return err
			}
			name := args[0]
			switch id, err := resolveID(ctx, s, name); {
			case err == nil:
				rec, err := s.LoadRecord(ctx, id)
				if err == nil {
					return a.verifyCheckpoint(ctx, bs, id, rec)
				}
				if !errors.Is(err, checkpoint.ErrNotFound) && !errors.Is(err, blobstore.ErrNotFound) {
					return err
				}
			case isAlias(name):
				return err // an alias names a checkpoint, never a savepoint
			}
			// Not a checkpoint of the store: a savepoint label, or nothing.
			if checkpoint.ValidateLabel(name) != nil {
				return fmt.Errorf("no checkpoint %q: %w", name, checkpoint.ErrNotFound)
			}
			info, err := bs.Stat(ctx, checkpoint.SavepointKey(name))
			if errors.Is(err, blobstore.ErrNotFound) {
				return fmt.Errorf("no checkpoint or savepoint named %q in the store", name)
			}
			if err != nil {
				return err
			}
			return a.verifySavepoint(ctx, bs, name, info.Size)
		},
	}
}

type verifyResult struct {
	Kind   string `json:"kind"` // "checkpoint" or "savepoint"
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Files  int    `json:"files"`
	Bytes  int64  `json:"bytes"`
	Error  string `json:"error,omitempty"`
	Source string `json:"checkpoint,omitempty"` // a savepoint's checkpoint id
}

// verifyFailed turns a verification error into the exit-3 kind: corrupt
// data, or a file the record names that is missing.
func verifyFailed(err error) error {
	if errors.Is(err, archive.ErrCorrupt) {
		return err
	}
	if errors.Is(err, blobstore.ErrNotFound) {
		return fmt.Errorf("%w: %w", errVerify, err)
	}
	return err
}

// reportVerify prints the verdict of a verification, v with OK when err is
// nil or with the damage err found (exit 3), and returns err. An err that is
// no verdict (store unreachable, interrupted) is only returned.
func (a *app) reportVerify(ctx context.Context, v verifyResult, err error) error {
	if err != nil {
		if err = verifyFailed(err); exitCode(ctx, err) != exitVerify {
			return err
		}
		v.Error = err.Error()
	}
	v.OK = err == nil
	a.emit(v, func(w io.Writer) {
		if v.OK {
			fmt.Fprintf(w, "%s %s: OK, %d files, %s verified\n", v.Kind, v.Name, v.Files, humanBytes(v.Bytes))
		} else {
			fmt.Fprintf(w, "%s %s: FAILED: %s\n", v.Kind, v.Name, v.Error)
		}
	})
	return err
}

// verifyCheckpoint re-reads every state file rec, the record of id, names.
func (a *app) verifyCheckpoint(ctx context.Context, bs blobstore.Blobstore, id string, rec *blobstorage.Record) error {
	ci := summarize(id, rec, time.Now())
	p := a.newProgress("verify "+id, ci.Size)
	err := readStorage(p.observed(bs)).Verify(ctx, id)
	p.done()
	return a.reportVerify(ctx, verifyResult{Kind: "checkpoint", Name: id, Files: ci.Files, Bytes: ci.Size}, err)
}

// verifySavepoint re-reads the archive of savepoint label (size bytes).
func (a *app) verifySavepoint(ctx context.Context, bs blobstore.Blobstore, label string, size int64) error {
	p := a.newProgress("verify "+label, size)
	rc, err := p.observed(blobstore.WithResumingReads(bs, blobstore.DefaultReadResumptions)).Get(ctx, checkpoint.SavepointKey(label))
	if err != nil {
		return err
	}
	defer rc.Close()
	m, err := archive.Verify(ctx, rc, archive.Limits{})
	p.done()
	v := verifyResult{Kind: "savepoint", Name: label}
	if err == nil {
		v.Files, v.Bytes, v.Source = len(m.Files), m.TotalSize(), manifestRecordID(m)
	}
	return a.reportVerify(ctx, v, err)
}

// manifestRecordID returns the checkpoint id of an archive's record ("" if
// the record does not say).
func manifestRecordID(m *archive.Manifest) string {
	var rec struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(m.Record, &rec)
	return rec.ID
}
