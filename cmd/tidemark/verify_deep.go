package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/savepoint"
)

// addDeepFlag adds verify's --deep flag and its help.
func addDeepFlag(cmd *cobra.Command, deep *bool) {
	cmd.Flags().BoolVar(deep, "deep", false, "read every object and name each missing or corrupt key, instead of stopping at the first")
	cmd.Long += `

With --deep, verify reads every object the checkpoint references (state files
against their SHA-256, remote objects whole, against their size and the store's
own checksum) and goes on after damage: it names each missing or corrupt key,
with its owner and file, then exits 3. For a savepoint it names the archive's key.
tidemark scrub does the same for every checkpoint and savepoint in the store.`
	cmd.Example += `
  tidemark verify --deep latest-completed   # every damaged key, not just the first`
}

// deepResult is the verdict of verify --deep.
type deepResult struct {
	Kind    string               `json:"kind"` // "checkpoint" or "savepoint"
	Name    string               `json:"name"`
	OK      bool                 `json:"ok"`
	Objects int                  `json:"objects"`
	Bytes   int64                `json:"bytes"`
	Damaged []blobstorage.Damage `json:"damaged,omitempty"`
}

// verifyCheckpointAt verifies checkpoint id, deeply if deep.
func (a *app) verifyCheckpointAt(ctx context.Context, bs blobstore.Blobstore, id string, rec *blobstorage.Record, deep bool) error {
	if !deep {
		return a.verifyCheckpoint(ctx, bs, id, rec)
	}
	ci := summarizeDeep(rec)
	p := a.newProgress("verify "+id, ci)
	rep, err := readStorage(p.observed(bs)).VerifyDeep(ctx, id)
	p.done()
	if err != nil {
		if corrupt(err) {
			return a.reportVerify(ctx, verifyResult{Kind: "checkpoint", Name: id}, err)
		}
		return err
	}
	return a.reportDeep(deepResult{Kind: "checkpoint", Name: id, Objects: rep.Objects, Bytes: rep.Bytes, Damaged: rep.Damaged})
}

// summarizeDeep returns the bytes a deep verification of rec reads.
func summarizeDeep(rec *blobstorage.Record) int64 {
	var n int64
	for _, files := range rec.Files {
		for _, f := range files {
			n += f.Size
		}
	}
	for _, refs := range rec.Remote {
		for _, r := range refs {
			n += r.Size
		}
	}
	return n
}

// verifySavepointDeep reads savepoint label (described by info) whole
// and names the object that is damaged, if one is: its own, or a content
// object.
func (a *app) verifySavepointDeep(ctx context.Context, bs blobstore.Blobstore, label string, info savepoint.Info) error {
	key := checkpoint.SavepointKey(label)
	v := deepResult{Kind: "savepoint", Name: label, Objects: 1, Bytes: info.Bytes}
	m, err := a.readSavepoint(ctx, bs, label, info)
	var de *savepoint.DamageError
	switch {
	case err == nil:
		if info.Format == savepoint.FormatManifest {
			objects := map[string]bool{}
			for _, f := range m.Files {
				objects[f.SHA256] = true
			}
			v.Objects += len(objects)
		}
	case errors.As(err, &de):
		v.Damaged = []blobstorage.Damage{{Key: de.Key, Missing: de.Missing, Reason: de.Err.Error(), Path: de.Path}}
	case errors.Is(err, blobstore.ErrNotFound):
		v.Damaged = []blobstorage.Damage{{Key: key, Missing: true, Reason: "missing"}}
	case corrupt(err), errors.Is(err, blobstore.ErrChecksum):
		v.Damaged = []blobstorage.Damage{{Key: key, Reason: err.Error()}}
	default:
		return err
	}
	return a.reportDeep(v)
}

// reportDeep prints v and returns the exit-3 error if it found damage.
func (a *app) reportDeep(v deepResult) error {
	v.OK = len(v.Damaged) == 0
	a.emit(v, func(w io.Writer) {
		if v.OK {
			fmt.Fprintf(w, "%s %s: OK, %s, %s read and verified\n", v.Kind, v.Name, plural(v.Objects, "object"), humanBytes(v.Bytes))
			return
		}
		fmt.Fprintf(w, "%s %s: FAILED: %d of %s missing or corrupt\n", v.Kind, v.Name, len(v.Damaged), plural(v.Objects, "object"))
		writeDamage(w, v.Damaged)
	})
	if v.OK {
		return nil
	}
	return quietError{fmt.Errorf("%w: %s %s: %s damaged", errVerify, v.Kind, v.Name, plural(len(v.Damaged), "object"))}
}

// writeDamage prints one line per damaged object: what, key, where.
func writeDamage(w io.Writer, damage []blobstorage.Damage) {
	for _, d := range damage {
		what := "corrupt"
		if d.Missing {
			what = "missing"
		}
		var where []string
		if d.Owner != "" {
			where = append(where, "owner "+d.Owner)
		}
		if d.Path != "" {
			where = append(where, "file "+d.Path)
		}
		if len(d.Checkpoints) > 0 {
			where = append(where, "in "+strings.Join(d.Checkpoints, ", "))
		}
		line := fmt.Sprintf("  %s %s", what, d.Key)
		if len(where) > 0 {
			line += " (" + strings.Join(where, "; ") + ")"
		}
		if !d.Missing && d.Reason != "" {
			line += ": " + d.Reason
		}
		fmt.Fprintln(w, line)
	}
}
