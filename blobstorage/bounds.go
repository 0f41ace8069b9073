package blobstorage

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/internal/jsonscan"
)

// Limits on what a Record or a Part may list, on top of the record
// limits of package checkpoint (checkpoint.MaxRecordBytes, MaxOwners and
// the rest, which bound every per-owner collection here too). They are
// checked on the raw bytes before decoding, when a record or part is read
// and before one is written, and refusals wrap checkpoint.ErrRecordTooLarge.
// With them, decoding the largest accepted record stays within the memory
// bound package checkpoint documents.
const (
	// MaxRecordFiles bounds the file references of a record (all owners
	// together) or of a part.
	MaxRecordFiles = 1_000_000
	// MaxRemoteObjects bounds the remote objects a record lists (all
	// owners together).
	MaxRemoteObjects = 1_000_000
)

// checkRecordBounds checks the limits of a record's raw bytes b.
func checkRecordBounds(b []byte) error {
	if err := checkpoint.CheckRecordBounds(b); err != nil {
		return err
	}
	var filesOwners, remoteOwners, workers, files, remote int
	return jsonscan.Object(b, func(key, v []byte) error {
		switch {
		case jsonscan.KeyIs(key, "files"):
			return perOwnerLists(v, "files", &filesOwners, &files, MaxRecordFiles)
		case jsonscan.KeyIs(key, "remote"):
			return perOwnerLists(v, "remote", &remoteOwners, &remote, MaxRemoteObjects)
		case jsonscan.KeyIs(key, "workers"):
			return members(v, "workers", &workers, checkpoint.MaxOwners, func(_, w []byte) error {
				return checkName("a worker id", w)
			})
		}
		return nil
	})
}

// checkPartBounds checks the limits of a part's raw bytes b.
func checkPartBounds(b []byte) error {
	if len(b) > checkpoint.MaxRecordBytes {
		return overLimit("%d bytes, over the %d-byte limit", len(b), checkpoint.MaxRecordBytes)
	}
	if !json.Valid(b) {
		return errors.New("not valid JSON")
	}
	var files int
	return jsonscan.Object(b, func(key, v []byte) error {
		switch {
		case jsonscan.KeyIs(key, "files"):
			return list(v, "files", &files, MaxRecordFiles)
		case jsonscan.KeyIs(key, "owner"), jsonscan.KeyIs(key, "worker"), jsonscan.KeyIs(key, "dir"), jsonscan.KeyIs(key, "id"):
			return checkName(string(key), v)
		}
		return nil
	})
}

// perOwnerLists checks an object of owner → list: at most MaxOwners
// owners and max elements in all lists together.
func perOwnerLists(v []byte, what string, owners, n *int, max int) error {
	return members(v, what, owners, checkpoint.MaxOwners, func(_, l []byte) error {
		return list(l, what, n, max)
	})
}

func list(v []byte, what string, n *int, max int) error {
	err := jsonscan.Array(v, func([]byte) error {
		if *n++; *n > max {
			return overLimit("%s: more than %d entries", what, max)
		}
		return nil
	})
	if errors.Is(err, jsonscan.ErrNotContainer) {
		return fmt.Errorf("%s: an owner's list is not an array", what)
	}
	return err
}

func members(v []byte, what string, n *int, max int, fn func(key, value []byte) error) error {
	err := jsonscan.Object(v, func(key, val []byte) error {
		if *n++; *n > max {
			return overLimit("%s: more than %d entries", what, max)
		}
		if len(key) > checkpoint.MaxNameBytes {
			return overLimit("%s: a key of %d bytes, over the %d-byte limit", what, len(key), checkpoint.MaxNameBytes)
		}
		return fn(key, val)
	})
	if errors.Is(err, jsonscan.ErrNotContainer) {
		return fmt.Errorf("%s is not an object", what)
	}
	return err
}

func checkName(what string, v []byte) error {
	if len(v) > checkpoint.MaxNameBytes+2 {
		return overLimit("%s of %d bytes, over the %d-byte limit", what, len(v)-2, checkpoint.MaxNameBytes)
	}
	return nil
}

func overLimit(format string, args ...any) error {
	return fmt.Errorf("%w: %s", checkpoint.ErrRecordTooLarge, fmt.Sprintf(format, args...))
}
