package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/tidemark-io/tidemark/archive"
	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/savepoint"
)

func (a *app) verifyCmd() *cobra.Command {
	var deep bool
	cmd := &cobra.Command{
		Use:   "verify ID|LABEL",
		Short: "Re-read a checkpoint or savepoint and check every digest",
		Long: `verify reads every byte of a checkpoint's state files (or of a savepoint: its
archive, or its manifest and every content object) from the store and checks each
file's size and SHA-256 against the record (or the savepoint's manifest). It writes
nothing but, for a savepoint, its lock while it reads (so that savepoint rm does not
delete what it reads). Exit 3 when anything is missing or corrupt.
The argument is a checkpoint id (or "latest", "latest-completed") when the store has
such a checkpoint, else a savepoint label; anything that can be neither is a usage
error (exit 2). A latest or latest-completed pointer that is damaged or names a
checkpoint with no record is exit 3.`,
		Example: `  tidemark verify latest-completed
  tidemark verify before-upgrade --store s3://backup/wordcount
  tidemark verify before-upgrade --output json || echo "corrupt: exit $?"`,
		Args: func(cmd *cobra.Command, args []string) error {
			if err := exactArgs("ID|LABEL")(cmd, args); err != nil {
				return err
			}
			return checkName(args[0], true)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			err := a.verify(cmd.Context(), args[0], deep)
			if err != nil && a.output == "json" && !errors.As(err, new(quietError)) {
				// No verdict was reached (store unreachable, no such
				// name): still one document on stdout, saying so.
				kind := "savepoint"
				if _, perr := checkpoint.ParseID(args[0]); perr == nil || isAlias(args[0]) {
					kind = "checkpoint"
				}
				a.emit(verifyResult{Kind: kind, Name: args[0], Error: interruptedError(cmd.Context(), err).Error()}, nil)
			}
			return err
		},
	}
	addDeepFlag(cmd, &deep)
	return cmd
}

// verify verifies the checkpoint or savepoint name and reports the
// verdict (see reportVerify).
func (a *app) verify(ctx context.Context, name string, deep bool) error {
	bs, s, err := a.openReader(ctx)
	if err != nil {
		return err
	}
	if isAlias(name) {
		// An alias names a checkpoint, never a savepoint.
		rec, err := loadNamed(ctx, s, name)
		if corrupt(err) {
			// A damaged pointer or record is a verdict: FAILED.
			return a.reportVerify(ctx, verifyResult{Kind: "checkpoint", Name: name}, err)
		}
		if err != nil {
			return err
		}
		return a.verifyCheckpointAt(ctx, bs, rec.ID, rec, deep)
	}
	if _, err := checkpoint.ParseID(name); err == nil {
		rec, err := s.LoadRecord(ctx, name)
		if err == nil {
			return a.verifyCheckpointAt(ctx, bs, name, rec, deep)
		}
		if corrupt(err) {
			return a.reportVerify(ctx, verifyResult{Kind: "checkpoint", Name: name}, err)
		}
		if !errors.Is(err, checkpoint.ErrNotFound) && !errors.Is(err, blobstore.ErrNotFound) {
			return err
		}
	}
	// Not a checkpoint of the store: a savepoint label, or nothing.
	if checkpoint.ValidateLabel(name) != nil {
		return fmt.Errorf("no checkpoint %q in the store (tidemark ls lists them): %w", name, checkpoint.ErrNotFound)
	}
	info, err := savepoint.Stat(ctx, bs, name)
	if errors.Is(err, blobstore.ErrNotFound) {
		return fmt.Errorf("no checkpoint or savepoint named %q in the store (tidemark ls lists them)", name)
	}
	if err != nil && !corrupt(err) { // a damaged one is a verdict
		return err
	}
	if deep {
		return a.verifySavepointDeep(ctx, bs, name, info)
	}
	return a.verifySavepoint(ctx, bs, name, info)
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
	if corrupt(err) {
		return err
	}
	if errors.Is(err, blobstore.ErrNotFound) {
		return fmt.Errorf("%w: %w", errVerify, err)
	}
	return err
}

// reportVerify prints the verdict of a verification, v with OK when err is
// nil or with the damage err found (exit 3, said once: in the verdict),
// and returns err. An err that is no verdict (store unreachable,
// interrupted) is only returned.
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
			fmt.Fprintf(w, "%s %s: OK, %s, %s verified\n", v.Kind, v.Name, plural(v.Files, "file"), humanBytes(v.Bytes))
		} else {
			fmt.Fprintf(w, "%s %s: FAILED: %s\n", v.Kind, v.Name, v.Error)
		}
	})
	if err != nil {
		// The verdict said it: no second copy of it on stderr.
		return quietError{err}
	}
	return nil
}

// verifyCheckpoint re-reads every state file rec, the record of id, names.
func (a *app) verifyCheckpoint(ctx context.Context, bs blobstore.Blobstore, id string, rec *blobstorage.Record) error {
	ci := summarize(id, rec, time.Now())
	p := a.newProgress("verify "+id, ci.Size)
	err := readStorage(p.observed(bs)).Verify(ctx, id)
	p.done()
	return a.reportVerify(ctx, verifyResult{Kind: "checkpoint", Name: id, Files: ci.Files, Bytes: ci.Size}, err)
}

// verifySavepoint re-reads savepoint label (described by info).
func (a *app) verifySavepoint(ctx context.Context, bs blobstore.Blobstore, label string, info savepoint.Info) error {
	m, err := a.readSavepoint(ctx, bs, label, info)
	v := verifyResult{Kind: "savepoint", Name: label}
	if err == nil {
		v.Files, v.Bytes, v.Source = len(m.Files), m.TotalSize(), manifestRecordID(m)
	}
	return a.reportVerify(ctx, v, err)
}

// readSavepoint reads savepoint label (described by info) whole,
// checking every digest (savepoint.Savepoint.Verify: an archive to its
// end, or the manifest and every content object), and returns its
// manifest.
func (a *app) readSavepoint(ctx context.Context, bs blobstore.Blobstore, label string, info savepoint.Info) (*archive.Manifest, error) {
	p := a.newProgress("verify "+label, info.Bytes)
	defer p.done()
	sp, err := savepoint.Open(ctx, p.observed(bs), label, savepoint.Options{})
	if err != nil {
		return nil, err
	}
	defer sp.Close()
	return sp.Verify(ctx)
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

// corrupt reports whether err is damage of the store or of an archive.
func corrupt(err error) bool {
	return errors.Is(err, blobstorage.ErrCorrupt) || errors.Is(err, archive.ErrCorrupt)
}
