package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
)

// BaseKey is the key, next to the sink's files, of the marker that says
// where the committed output of this store starts when the job was
// resumed here from a savepoint restored out of another store.
const BaseKey = "demo/base"

// Base says which records the committed output of one store covers:
// [Offset, Records). It is the zero Base (every record) unless the job
// was resumed in this store from a savepoint taken in another one (the
// cross-region story: savepoint create on store east, savepoint cp east
// west, savepoint restore on west, demo on west). The output of the
// records before the savepoint was committed in the store the savepoint
// came from, so this store's sink cannot and must not hold it, while the
// state restored from the savepoint does count them. The same holds for
// a savepoint restored as a new job (checkpoint.JobStartKey) onto a store
// holding another job's checkpoints and output.
type Base struct {
	// Offset is the first record whose output this store's sink holds:
	// the source offset of the restored savepoint checkpoint.
	Offset uint64 `json:"offset"`
	// Checkpoint is the id of that checkpoint, "" for the zero Base.
	Checkpoint string `json:"checkpoint,omitempty"`
}

// FromSavepoint reports whether the output of this store starts at a
// restored savepoint rather than at record 0.
func (b Base) FromSavepoint() bool { return b.Checkpoint != "" }

// outputBase decides the Base of the run that restored cp (nil: a fresh
// start) with source offset next, and records it in bs the first time it
// applies. committedThrough says whether the sink holds a commit at or
// below an id.
//
// A completed checkpoint's sink transaction committed (that is what
// completed means), and a job that ran in this store committed it here.
// So when the run restores a checkpoint and this store's sink holds no
// committed transaction at or below its id, that output was committed in
// another store: the checkpoint came here by a savepoint restore, and
// this store's output starts at its offset. That test holds only before
// this store commits anything, so the answer is written to BaseKey before
// the run processes a record; later runs (after a crash, or again after
// the end) restore checkpoints whose output is committed here, and read
// the Base from the marker.
func outputBase(ctx context.Context, bs blobstore.Blobstore, committedThrough func(context.Context, string) (bool, error), cp *checkpoint.CheckpointData, next uint64) (Base, error) {
	if cp == nil {
		// A fresh start commits the output of every record here; a marker
		// left from an earlier life of the store would make a later
		// resume of this run expect less. Remove it first.
		if err := bs.Delete(ctx, BaseKey); err != nil {
			return Base{}, fmt.Errorf("demo: output base: remove %q: %w", BaseKey, err)
		}
		return Base{}, nil
	}
	marker, etag, found, err := readBase(ctx, bs)
	if err != nil {
		return Base{}, err
	}
	if found && marker.Checkpoint == cp.ID {
		return marker, nil // a restart from the same restored savepoint
	}
	// A job started here from another job's state commits nothing at
	// or below its first checkpoint: what the sink holds there is the
	// earlier job's output.
	committed := false
	if !cp.StartsJob() {
		if committed, err = committedThrough(ctx, cp.ID); err != nil {
			return Base{}, fmt.Errorf("demo: output base: %w", err)
		}
	}
	if committed {
		// The output up to cp is (at least partly) here: either the job
		// always ran in this store (no marker: every record), or it
		// started here from the savepoint the marker names.
		return marker, nil
	}
	// Resumed from a restored savepoint. A marker naming another
	// checkpoint is stale: restoring cp required this store's latest
	// checkpoint to be older than cp, and a transaction commits only
	// after its checkpoint was persisted, so no committed output here
	// (none at or below cp, and none above) came from a run that started
	// at the old marker.
	b := Base{Offset: next, Checkpoint: cp.ID}
	body, _ := json.Marshal(b) // plain fields: cannot fail
	if found {
		_, err = bs.PutIfMatch(ctx, BaseKey, etag, bytes.NewReader(body))
	} else {
		_, err = bs.PutIfAbsent(ctx, BaseKey, bytes.NewReader(body))
	}
	if errors.Is(err, blobstore.ErrPreconditionFailed) {
		// Written since we read it: by our own retried write, or by a
		// writer that fenced us (whose record we must not overwrite).
		got, _, ok, rerr := readBase(ctx, bs)
		if rerr != nil {
			return Base{}, rerr
		}
		if ok && got == b {
			return b, nil
		}
		return Base{}, fmt.Errorf("demo: output base: %q changed under us (now %+v): %w", BaseKey, got, err)
	}
	if err != nil {
		return Base{}, fmt.Errorf("demo: output base: write %q: %w", BaseKey, err)
	}
	return b, nil
}

// readBase reads the marker at BaseKey; found is false when there is
// none.
func readBase(ctx context.Context, bs blobstore.Blobstore) (b Base, etag string, found bool, err error) {
	info, err := bs.Stat(ctx, BaseKey)
	if errors.Is(err, blobstore.ErrNotFound) {
		return Base{}, "", false, nil
	}
	if err != nil {
		return Base{}, "", false, fmt.Errorf("demo: output base: read %q: %w", BaseKey, err)
	}
	rc, err := bs.Get(ctx, BaseKey)
	if err != nil {
		return Base{}, "", false, fmt.Errorf("demo: output base: read %q: %w", BaseKey, err)
	}
	defer rc.Close()
	raw, err := io.ReadAll(rc)
	if err != nil {
		return Base{}, "", false, fmt.Errorf("demo: output base: read %q: %w", BaseKey, err)
	}
	if err := json.Unmarshal(raw, &b); err != nil {
		return Base{}, "", false, fmt.Errorf("%w: %s: %v", ErrCorruptOutput, BaseKey, err)
	}
	if err := checkpoint.ValidateID(b.Checkpoint); err != nil {
		return Base{}, "", false, fmt.Errorf("%w: %s: %v", ErrCorruptOutput, BaseKey, err)
	}
	// Stat before Get: if the marker changed in between, the ETag is the
	// older one and a compare-and-swap based on it fails safely.
	return b, info.ETag, true, nil
}
