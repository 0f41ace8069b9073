package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/savepoint"
)

// newLabelArgs is labelArgs for commands that name a new savepoint: the
// label must pass checkpoint.ValidateNewLabel.
func newLabelArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := labelArgs(names...)(cmd, args); err != nil {
			return err
		}
		if err := checkpoint.ValidateNewLabel(args[0]); err != nil {
			return usageError{err}
		}
		return nil
	}
}

// refuseExisting returns the error for a savepoint label that bs holds
// already (nil if it holds none): it names the label, the store and the
// checkpoint the savepoint holds. This is the early, friendly check; the
// write itself is a PutIfAbsent, so a savepoint created meanwhile is not
// replaced either (see existsError).
func refuseExisting(ctx context.Context, bs blobstore.Blobstore, label, where string) error {
	_, err := bs.Stat(ctx, checkpoint.SavepointKey(label))
	switch {
	case errors.Is(err, blobstore.ErrNotFound):
		return nil
	case err != nil:
		return err
	}
	return existsError(ctx, bs, label, where, checkpoint.ErrSavepointExists)
}

// existsError says that savepoint label exists in bs (where names the
// store) and which checkpoint it holds, wrapping err.
func existsError(ctx context.Context, bs blobstore.Blobstore, label, where string, err error) error {
	held := "a checkpoint"
	if id := savepointCheckpointID(ctx, bs, label); id != "" {
		held = "checkpoint " + id
	}
	return fmt.Errorf("savepoint %q already exists in %s (it holds %s); nothing was changed: give --replace to replace it, or choose another label: %w",
		label, where, held, err)
}

// savepointCheckpointID returns the id of the checkpoint savepoint label
// holds, read from its manifest, or "" if it cannot be read.
func savepointCheckpointID(ctx context.Context, bs blobstore.Blobstore, label string) string {
	m, _, err := savepoint.ReadManifest(ctx, bs, label, savepoint.Options{})
	if err != nil {
		return ""
	}
	return manifestRecordID(m)
}

// sentSummary says what a savepoint operation wrote: "12.0 KiB uploaded
// (1 of 100 objects; the store held the others)".
func sentSummary(verb string, st savepoint.Stats) string {
	s := fmt.Sprintf("%s %s (%d of %s", humanBytes(st.UploadedBytes), verb, st.Uploaded, plural(st.Objects, "object"))
	if st.Uploaded < st.Objects {
		s += "; the store held the others"
	}
	return s + ")"
}
